"""Issue 29: where gpuconf looks like Ansible it behaves like Ansible. Every playbook of
tests/ansible_diff/playbooks runs through ansible-core's ansible-playbook (the oracle, from its
own virtual environment: `make test` builds tests/.ansible-venv) and through gpuconf, against the
same lab nodes; what they leave behind must match: files (content, mode, owner), which hosts ran
which task with which status, the debug messages (registered values, templates), the recap counts
and the exit status class. A documented difference (docs/ansible.md) is asserted as gpuconf's
refusal instead."""
from __future__ import annotations

import shlex
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.ansible_diff import harness
from tests.lab_fixtures import ssh_client, ssh_run

CASES = harness.cases()


@pytest.fixture(scope="module")
def runs(lab, tmp_path_factory):
    """Every case through both tools, two cases at a time, then what they left on the nodes."""
    if not harness.ANSIBLE_PLAYBOOK.exists():
        pytest.fail(f"ansible-core is missing: {harness.ANSIBLE_PLAYBOOK} (`make test` builds it)")
    work = tmp_path_factory.mktemp("ansdiff")
    for info in lab.nodes:
        client = ssh_client(lab, info.name)
        try:
            ssh_run(client, "sudo rm -rf " + shlex.quote(harness.ROOT))
        finally:
            client.close()
    inventory = harness.write_inventory(lab, work / "inventory.yml")

    def both(case: harness.Case) -> tuple[harness.Outcome, harness.Outcome]:
        return harness.run_ansible(case, inventory, lab, work), harness.run_gpuconf(case, inventory, work)

    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = dict(zip([c.name for c in CASES], pool.map(both, CASES)))
    yield outcomes, harness.left_behind(lab, ssh_client, ssh_run)
    shutil.rmtree(harness.control_dir(work), ignore_errors=True)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gpuconf_does_what_ansible_does(case, runs, request):
    if "xfail" in case.settings:   # a finding not fixed yet: strict, so that its fix must remove the mark,
        reason = case.settings["xfail"]   # unless it is racy today (then it may pass by chance)
        request.applymarker(pytest.mark.xfail(reason=reason, strict="racy" not in reason))
    outcomes, state = runs
    ansible, gpuconf = outcomes[case.name]
    harness.normalize(case, ansible)
    harness.normalize(case, gpuconf)
    shown = f"\n--- ansible:\n{ansible.output[-3000:]}\n--- gpuconf:\n{gpuconf.output[-3000:]}"
    assert "Traceback" not in gpuconf.output, shown
    if "refused" in case.settings:
        assert ansible.exit_class == "refused", shown
        assert gpuconf.exit_class == "refused" and case.settings["refused"] in gpuconf.output, shown
        return
    if "differs" in case.settings:   # a documented difference: Ansible runs it, gpuconf says why not
        assert ansible.exit_class != "refused", shown
        assert gpuconf.exit_class == "refused" and case.settings["differs"] in gpuconf.output, shown
        return
    assert gpuconf.exit_class == ansible.exit_class, shown
    assert gpuconf.tasks == ansible.tasks, shown
    assert gpuconf.messages == harness.ansible_messages(ansible), shown
    assert gpuconf.counts == ansible.counts, shown
    assert harness.files_of(state, "gpuconf", case.name) == harness.files_of(state, "ansible", case.name), shown


def test_there_are_at_least_40_playbooks():
    assert len(CASES) >= 40
