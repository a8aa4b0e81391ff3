#!/bin/bash
# Byte-identical plans before and after a speed change: `planner solve --format json
# --no-timings` on every example in problems/, once on git revision REV and once on this
# working tree, each tree run from its own folder with PYTHONPATH set to it; prints the
# process CPU seconds (user, system) and wall seconds of each solve, exit status 1 if any
# plan, error output or exit code differs.
#     benchmarks/same_plans.sh REV [TIME_LIMIT]
set -u
rev=$1
limit=${2:-600}  # wall seconds: far above any example's, so a loaded machine cannot cut a search short
here=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/rev" "$tmp/work"
git -C "$here" archive "$rev" planner problems | tar -x -C "$tmp/rev"
cp -r "$here/planner" "$here/problems" "$tmp/work/"
status=0
for p in "$here"/problems/*.yaml; do
  n=$(basename "$p" .yaml)
  for t in rev work; do
    (cd "$tmp/$t" && PYTHONPATH="$tmp/$t" /usr/bin/time -f "%U %S %e" -o "$tmp/$t.$n.time" \
      "$py" -c "import sys; from planner import main; sys.exit(main())" solve "problems/$n.yaml" \
      --format json --no-timings --time-limit "$limit" >"$tmp/$t.$n.out" 2>"$tmp/$t.$n.err"
     echo $? >"$tmp/$t.$n.rc")
  done
  same=same
  for x in out err rc; do cmp -s "$tmp/rev.$n.$x" "$tmp/work.$n.$x" || same=DIFFERS; done
  [ $same = same ] || status=1
  printf '%-28s %-8s cpu+wall %s: %s   this tree: %s\n' "$n" $same "$rev" \
    "$(tail -1 "$tmp/rev.$n.time")" "$(tail -1 "$tmp/work.$n.time")"
done
exit $status
