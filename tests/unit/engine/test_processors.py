"""The runner's one event interface (gpuconf/engine/processors.py): every processor hears every
event, in order, and what `run_completed` hands back is a section of the run's result."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass

from gpuconf.engine.after import OpenHosts
from gpuconf.engine.options import RunOptions
from gpuconf.engine.processors import NoEvents
from gpuconf.engine.runner import Runner
from gpuconf.inventory.hosts import load_inventory
from gpuconf.playbook.loader import load_playbook
from gpuconf.results import EXIT_FAILED, EXIT_OK, Final, RecapLine, RunResult, TaskResult


@dataclass
class Heard(Final):
    key: str = "heard"
    hosts: int = 0

    def report(self) -> object:
        return self.hosts

    def recap(self) -> list[RecapLine]:
        return []

    def exit_bits(self) -> int:
        return EXIT_FAILED if not self.hosts else EXIT_OK


class Recorder(NoEvents):
    def __init__(self, name: str, heard: list[str]):
        self.name, self.heard = name, heard

    def play_started(self, play: str, hosts: list[str]) -> None:
        self.heard.append(f"{self.name} play {play} {','.join(hosts)}")

    def task_started(self, host: str, task: str) -> None:
        self.heard.append(f"{self.name} start {host} {task}")

    def task_completed(self, result: TaskResult) -> None:
        self.heard.append(f"{self.name} done {result.host} {result.task} {result.status.value}")

    def host_completed(self, host: str) -> None:
        self.heard.append(f"{self.name} host {host}")

    def run_completed(self, run: RunResult, hosts: OpenHosts) -> Heard | None:
        self.heard.append(f"{self.name} run {len(run.hosts)}")
        return Heard(hosts=len(run.hosts)) if self.name == "second" else None


def test_every_processor_hears_every_event_in_order_and_hands_back_its_section(tmp_path):
    (tmp_path / "site.yml").write_text(textwrap.dedent("""\
        - name: one
          hosts: all
          gather_facts: false
          tasks:
            - name: fine
              assert: {that: "true"}
            - name: say
              debug: {msg: hello}
        """))
    heard: list[str] = []
    runner = Runner(load_inventory("h1,"), load_playbook(tmp_path / "site.yml", tmp_path),
                    RunOptions(connection="local"), processors=[Recorder("first", heard), Recorder("second", heard)])
    result = runner.run()
    assert heard == [
        "first play one h1", "second play one h1",
        "first start h1 gathering facts", "second start h1 gathering facts",
        "first start h1 fine", "second start h1 fine",
        "first done h1 fine ok", "second done h1 fine ok",
        "first start h1 say", "second start h1 say",
        "first done h1 say ok", "second done h1 say ok",
        "first host h1", "second host h1",
        "first run 1", "second run 1",
    ]
    assert [section.key for section in result.sections] == ["heard"]
    assert result.exit_code == 0
