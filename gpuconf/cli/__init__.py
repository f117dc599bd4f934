"""The command line: the verbs and their arguments. argparse ends here: each verb turns its
namespace into typed options (`engine.options.RunOptions`, remediate's and the gate's own) and
nothing below this package sees a Namespace. It owns the project configuration (`gpuconf.cfg`,
`GPUCONF_*`), loading what a run needs (inventory, playbook, vaults), the retry file, and the
listings and outputs of `check` and `apply`."""
