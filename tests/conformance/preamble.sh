# Sourced by every bash script a target runs (BASH_ENV), before its first line: tests/conformance.
# `set -e` is recorded, not obeyed: a check that fails (a command that would end the script under
# set -e, or `exit N` with N > 0) is written to CONFORMANCE_LOG/failures with the number of the last
# run made before it, and the script goes on, so that every run of the target is judged.
__conformance_errexit=0
__conformance_fail() {
  [ "$__conformance_errexit" = 1 ] || [ "${2#exit }" != "$2" ] || return 0
  [ "$BASH_SUBSHELL" = 0 ] || return 0
  printf '%s\t%s\t%s\t%s\n' "$(cat "$CONFORMANCE_LOG/count" 2>/dev/null || echo 0)" "${BASH_SOURCE[1]:-?}" "$1" "$2" \
    >> "$CONFORMANCE_LOG/failures"
}
set() {
  local arg out=() after_o=0
  for arg in "$@"; do
    if [ "$after_o" = 1 ]; then
      after_o=0
      if [ "$arg" = errexit ]; then
        [ "${out[${#out[@]}-1]}" = -o ] && __conformance_errexit=1 || __conformance_errexit=0
        unset "out[${#out[@]}-1]"
        continue
      fi
      out+=("$arg")
      continue
    fi
    case "$arg" in
      --) out+=("$@"); break;;
      -o|+o) after_o=1; out+=("$arg");;
      -*e*) __conformance_errexit=1; arg="${arg//e/}"; [ "$arg" != - ] && out+=("$arg");;
      +*e*) __conformance_errexit=0; arg="${arg//e/}"; [ "$arg" != + ] && out+=("$arg");;
      *) out+=("$arg");;
    esac
  done
  [ "${#out[@]}" = 0 ] || builtin set "${out[@]}"
}
exit() {
  local code="${1:-$?}"
  if [ "$code" != 0 ] && [ "$BASH_SUBSHELL" = 0 ]; then
    __conformance_fail "${BASH_LINENO[0]}" "exit $code"
    return 0
  fi
  builtin exit "$code"
}
trap '__conformance_fail "$LINENO" "$BASH_COMMAND"' ERR
builtin set -E
