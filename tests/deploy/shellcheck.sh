#!/usr/bin/env bash
# Runs shellcheck on the job templates of deploy/jobs (*.sbatch, *.lsf, *.pbs, *.sh) and on
# the deploy test scripts, with every severity down to style (bash dialect). Exit 77 (skipped,
# "SKIPPED: <reason>") where the linter is missing; with CI=true that fails instead
# (tools/install-deps.sh --test installs it; tests/support/skip.sh).
#   tests/deploy/shellcheck.sh        (ctest -R deploy.shellcheck)
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
command -v shellcheck >/dev/null 2>&1 ||
  exec bash "$root/tests/support/skip.sh" shellcheck \
    "shellcheck not found (apt-get install shellcheck, or tools/install-deps.sh --test)"
mapfile -t files < <(find "$root/deploy/jobs" "$root/tests/deploy" -type f \
  \( -name '*.sbatch' -o -name '*.lsf' -o -name '*.pbs' -o -name '*.sh' \) | sort)
((${#files[@]} > 0)) || { echo "FAIL: no job templates found under $root/deploy/jobs"; exit 1; }
echo "shellcheck $(shellcheck --version | sed -n 's/^version: //p') on ${#files[@]} files"
if shellcheck --shell=bash --severity=style --external-sources "${files[@]}"; then
  printf '  clean: %s\n' "${files[@]#"$root"/}"
  exit 0
fi
exit 1
