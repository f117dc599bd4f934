"""Reading what users write, safely: a user's file within bounds (`bounded`), YAML with the line
and column of every value (`yamlsrc`), and Ansible Vault (`vault`). The lowest layer with errors."""
