#!/usr/bin/env bash
# Skipping for the shell tests, as kiln::test::skip_missing (tests/support/testing.h) does for the
# C++ ones: no test passes for want of a dependency.
#   bash tests/support/skip.sh WHAT REASON           a test command of its own, or exec'd by one
#   source tests/support/skip.sh; skip_missing WHAT REASON
# prints "SKIPPED: WHAT: REASON" (the line .ci/run's summary greps from CTest's log) and exits 77,
# which CTest reports as Skipped (SKIP_RETURN_CODE 77); with CI=true in the environment the
# dependency is required (tools/install-deps.sh installs it): it prints
# "MISSING (required with CI=true): WHAT: REASON" and exits 1 instead.
# skip_unavailable WHAT REASON skips under CI=true as well: for what no install provides (root).
#   tests/support/skip.sh slurm-wlm "slurmctld not found"; echo $?      (77, or 1 with CI=true)

skip_missing() {
  if [[ ${CI:-} == true ]]; then
    echo "MISSING (required with CI=true): $1: $2"
    exit 1
  fi
  echo "SKIPPED: $1: $2"
  exit 77
}

skip_unavailable() {
  echo "SKIPPED: $1: $2"
  exit 77
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  (($# == 2)) || { echo "usage: $0 WHAT REASON" >&2; exit 2; }
  skip_missing "$1" "$2"
fi
