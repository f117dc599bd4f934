"""`ping`: the host answers, as Ansible's ping module answers: its runner ran there and read the
host's identity. It changes nothing; `data` is what it answers (`ping: pong` by default), and
`data: crash` fails the task, as Ansible's module raises then (its way of testing a failure)."""
from __future__ import annotations

from gpuconf.facts.base import Fact, host_info
from gpuconf.tasks.base import Facts, Params, Refused, TaskType, Verdict, in_sync


class PingParams(Params):
    data: str = "pong"


class Ping(TaskType[PingParams]):
    """Reach the host (connection, runner) and answer `ping: DATA`; nothing is changed. A host
    that cannot be reached is unreachable, as for any task (`ignore_unreachable` goes on)."""

    name = "ping"
    Params = PingParams

    def reads(self, params: PingParams) -> list[Fact]:
        return [host_info()]

    def check(self, params: PingParams, facts: Facts) -> Verdict:
        facts[host_info()]   # the runner answered on the host
        if params.data == "crash":
            raise Refused("boom")
        return in_sync(params.data, ping=params.data)
