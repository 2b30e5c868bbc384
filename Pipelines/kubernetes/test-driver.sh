#!/usr/bin/env bash
# Runs driver.sh end to end without a cluster: a stand-in kubectl (written below) plays the
# Job controller, running every index of an Indexed Job as a local process with
# JOB_COMPLETION_INDEX set, retrying a failed index up to backoffLimitPerIndex times unless
# its exit code is one of the pod failure policy's FailIndex codes, and reporting the Job's
# Complete or Failed condition to kubectl wait and kubectl get. The /shared volume is a
# temporary folder.
#
#   Pipelines/kubernetes/test-driver.sh [WINBACK]     (default: .build/debug/winback)
#
# Checks: a run of 3 partition tasks and 4 shards publishes the same files as a run in memory
# (manifest.json aside); a partition task that fails (a corrupt gzip input) stops the run at
# that stage, creates no later Job and publishes nothing. Ends "kubernetes-driver: N passed,
# M failed".
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
winback=${1:-${WINBACK:-$repo/.build/debug/winback}}
[[ -x $winback ]] || { echo "no winback executable at $winback" >&2; exit 1; }
winback=$(cd "$(dirname "$winback")" && pwd)/$(basename "$winback")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/shared" "$tmp/jobs"
ln -s "$winback" "$tmp/bin/winback"

cat >"$tmp/bin/kubectl" <<'EOF'
#!/usr/bin/env python3
# A stand-in for kubectl: create -f -, wait --for=condition=X job/NAME, get job/NAME -o jsonpath.
import json, os, subprocess, sys, yaml

jobs = os.environ["FAKE_JOBS"]
args = [a for a in sys.argv[1:]]
while "--namespace" in args:
    i = args.index("--namespace"); del args[i:i + 2]

def state(name):
    with open(os.path.join(jobs, name + ".json")) as f:
        return json.load(f)

if args[:2] == ["create", "-f"]:
    job = yaml.safe_load(sys.stdin)
    spec = job["spec"]
    name = job["metadata"]["name"]
    container = spec["template"]["spec"]["containers"][0]
    fail_codes = set()
    for rule in spec.get("podFailurePolicy", {}).get("rules", []):
        if rule["action"] == "FailIndex":
            fail_codes |= set(rule["onExitCodes"]["values"])
    failed = []
    for index in range(spec["completions"]):
        env = dict(os.environ, JOB_COMPLETION_INDEX=str(index))
        for attempt in range(spec.get("backoffLimitPerIndex", 0) + 1):
            with open(os.path.join(jobs, f"{name}-{index}.log"), "a") as log:
                code = subprocess.run(container["command"], env=env, stdout=log, stderr=log).returncode
            if code == 0 or code in fail_codes:
                break
        if code != 0:
            failed.append(index)
    with open(os.path.join(jobs, name + ".json"), "w") as f:
        json.dump({"condition": "Failed" if failed else "Complete",
                   "failedIndexes": ",".join(map(str, failed)), "spec": spec}, f)
    print(f"job.batch/{name} created")
elif args[0] == "wait":
    condition = next(a.split("=", 1)[1] for a in args if a.startswith("--for=condition="))
    name = next(a for a in args if a.startswith("job/"))[4:]
    sys.exit(0 if state(name)["condition"].lower() == condition.lower() else 1)
elif args[0] == "get":
    name = args[1][4:]
    path = next(a for a in args if a.startswith("jsonpath="))
    s = state(name)
    print(s["failedIndexes"] if "failedIndexes" in path else s["condition"], end="")
else:
    sys.exit(f"fake kubectl: unsupported {args}")
EOF
chmod +x "$tmp/bin/kubectl"

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
not_ok() { failed=$((failed + 1)); echo "FAILED: $*"; }

# A generated world on the "volume", its pipeline with absolute paths, as pipeline.yaml has.
"$winback" generate --customers 2000 --seed 3 --out "$tmp/shared/exports" >/dev/null
sed -e "s|\"transactions-\*.jsonl.gz\"|\"$tmp/shared/exports/transactions-*.jsonl.gz\"|" \
    -e "s|\"renewal-info.jsonl.gz\"|\"$tmp/shared/exports/renewal-info.jsonl.gz\"|" \
    -e "s|^offers: offers.json|offers: $tmp/shared/exports/offers.json|" \
    -e "s|^  directory: out|  directory: $tmp/shared/output|" \
    "$tmp/shared/exports/pipeline.yaml" >"$tmp/pipeline.yaml"

drive() {
    PATH="$tmp/bin:$PATH" FAKE_JOBS="$tmp/jobs" WINBACK_IMAGE=registry.example.com/winback:test \
        WINBACK_SHARED="$tmp/shared" WINBACK_PIPELINE="$1" WINBACK_RUN_ID="$2" \
        WINBACK_SHARDS=4 WINBACK_TASKS=3 WINBACK_TIMEOUT=10s POD_NAMESPACE=winback \
        bash "$here/driver.sh" >"$tmp/driver.out" 2>&1
}

echo "== a run: 3 partition tasks, 4 shards, a merge"
if drive "$tmp/pipeline.yaml" run-ok; then ok "the driver exited 0"; else not_ok "the driver failed"; fi
sed 's/^/  | /' "$tmp/driver.out"
"$winback" run "$tmp/pipeline.yaml" --output "$tmp/inmem" >/dev/null 2>&1
a=$(cd -P "$tmp/shared/output"/*/latest && pwd)
b=$(cd -P "$tmp/inmem"/*/latest && pwd)
files=$(cd "$a" && find . -type f ! -name manifest.json | LC_ALL=C sort)
if [[ -n $files && $files == "$(cd "$b" && find . -type f ! -name manifest.json | LC_ALL=C sort)" ]] &&
    while read -r f; do cmp "$a/$f" "$b/$f" || exit 1; done <<<"$files"; then
    ok "published the same $(wc -l <<<"$files") files as a run in memory"
else
    not_ok "the published files differ from a run in memory"
fi
if [[ ! -e $tmp/shared/work/run-ok ]]; then ok "the work folder was removed"; else not_ok "the work folder is still there"; fi

echo "== a partition task fails"
cp -a "$tmp/shared/exports" "$tmp/shared/bad"
victim=$(find "$tmp/shared/bad" -name 'transactions-*.jsonl.gz' | LC_ALL=C sort | sed -n 5p)
name=$(basename "$victim")
head -c 4000 "$tmp/shared/exports/$name" >"$victim"
sed "s|$tmp/shared/exports/transactions|$tmp/shared/bad/transactions|" "$tmp/pipeline.yaml" >"$tmp/bad.yaml"
before=$(cd "$tmp/shared/output" && find . -printf '%p %l\n' | LC_ALL=C sort)
if drive "$tmp/bad.yaml" run-bad; then not_ok "the driver exited 0"; else ok "the driver failed"; fi
sed 's/^/  | /' "$tmp/driver.out"
if grep -q 'stage winback-run-bad-partition failed' "$tmp/driver.out" && [[ ! -e $tmp/jobs/winback-run-bad-shard.json ]]; then
    ok "stopped at the partition stage; no shard or merge Job was created"
else
    not_ok "the run went past the failed partition stage"
fi
if [[ $(cd "$tmp/shared/output" && find . -printf '%p %l\n' | LC_ALL=C sort) == "$before" ]]; then
    ok "nothing new was published"
else
    not_ok "the output folder changed"
fi

echo "kubernetes-driver: $passed passed, $failed failed"
((failed == 0))
