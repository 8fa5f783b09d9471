# Shared helpers of the end-to-end shell tests (sourced, not run).
# Sets T (a scratch directory removed on exit) and counts failures.
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
pass() { echo "ok: $1"; }
fail() { echo "FAIL: $1"; fails=$((fails + 1)); }
# expect CODE NAME CMD...: runs CMD (stdout in $T/out, stderr in $T/err),
# compares its exit code.
expect() {
  local want=$1 name=$2
  shift 2
  "$@" >"$T/out" 2>"$T/err"
  local got=$?
  if [ "$got" = "$want" ]; then pass "$name"; else
    fail "$name: exit $got, want $want"
    sed 's/^/  | /' "$T/err" | head -5
  fi
}
# finish: the summary line and the exit status.
finish() {
  if [ "$fails" -ne 0 ]; then
    echo "$fails failure(s)"
    exit 1
  fi
  echo "all passed"
}
