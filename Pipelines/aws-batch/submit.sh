#!/usr/bin/env bash
# Submits a winback run to AWS Batch as three jobs (docs/rules.md §8) and waits for the last:
#   partition   array job of M children: winback partition PIPELINE --work DIR --shards N --tasks M
#   shard       array job of N children, dependsOn the whole partition job: winback run ...
#   merge       one job, dependsOn the whole shard job: winback merge ... (publishes the run)
# Children take their index from AWS_BATCH_JOB_ARRAY_INDEX. A job whose dependency failed
# fails too, so a failed task stops the run and nothing is published.
# The requests are submit-partition.json, submit-shard.json and submit-merge.json beside this
# script, with this run's values filled in. Run ./submit.sh --help for the options.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

usage() {
    cat <<'EOF'
Usage: submit.sh PIPELINE --work DIR --shards N --tasks M [options]

  PIPELINE          the pipeline file, as the containers see it (on the EFS volume, e.g.
                    /mnt/winback/pipeline.yaml); its inputs and output directory there too
  --work DIR        the run's work folder as the containers see it, a fresh one per run
                    (default /mnt/winback/work/RUN)
  --shards N        shards: the children of the shard job (memory per child ~ 1/N of the run)
  --tasks M         partition children (input file k goes to child k mod M)
  --queue Q         job queue (default winback)
  --definition D    job definition, name or name:revision (default winback)
  --run-id ID       names the jobs and the default work folder (default: UTC date-time)
  --no-wait         submit and print the three job ids, do not wait
  --poll SECONDS    how often to ask Batch about the merge job (default 30)
  --dry-run         print the three SubmitJob requests (JSON, one a line), submit nothing
  -h, --help        this help

The AWS CLI's usual settings apply (AWS_PROFILE, AWS_REGION, ...).
Exit status: 0 when the merge job succeeded; the merge's exit code when it failed; the exit
code of the first failed partition or shard child (1 when it has none) when the merge never
ran; 64 usage; 69 when a submission fails.
EOF
}

die() {
    local status=$1
    shift
    echo "submit.sh: $*" >&2
    exit "$status"
}
log() { echo "submit.sh: $*" >&2; }

pipeline="" work="" shards="" tasks="" queue=winback definition=winback run_id="" wait=1 poll=30 dry=0
while [[ $# -gt 0 ]]; do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --work) work=${2:?--work needs a value}; shift 2 ;;
        --shards) shards=${2:?--shards needs a value}; shift 2 ;;
        --tasks) tasks=${2:?--tasks needs a value}; shift 2 ;;
        --queue) queue=${2:?--queue needs a value}; shift 2 ;;
        --definition) definition=${2:?--definition needs a value}; shift 2 ;;
        --run-id) run_id=${2:?--run-id needs a value}; shift 2 ;;
        --poll) poll=${2:?--poll needs a value}; shift 2 ;;
        --no-wait) wait=0; shift ;;
        --dry-run) dry=1; shift ;;
        -*) die 64 "unknown option $1 (see --help)" ;;
        *)
            [[ -z $pipeline ]] || die 64 "one pipeline only"
            pipeline=$1
            shift
            ;;
    esac
done
[[ -n $pipeline ]] || die 64 "no pipeline (see --help)"
[[ $shards =~ ^[1-9][0-9]*$ && $shards -le 10000 ]] || die 64 "--shards needs 1..10000"
[[ $tasks =~ ^[1-9][0-9]*$ && $tasks -le 10000 ]] || die 64 "--tasks needs 1..10000"
run_id=${run_id:-$(date -u +%Y%m%d-%H%M%S)}
[[ $run_id =~ ^[A-Za-z0-9_-]{1,100}$ ]] || die 64 "--run-id: letters, digits, - and _ only"
work=${work:-/mnt/winback/work/$run_id}

# request STAGE [DEPENDENCY]: the SubmitJob request of one stage, from its template. An array
# job needs 2 to 10,000 children, so a stage of one task is a plain job given its index.
request() {
    RUN_ID=$run_id PIPELINE=$pipeline WORK=$work SHARDS=$shards TASKS=$tasks QUEUE=$queue \
        DEFINITION=$definition python3 - "$here/submit-$1.json" "$1" "${2:-}" <<'PY'
import json, os, sys
path, stage, dependency = sys.argv[1:4]
r = json.load(open(path))
e = os.environ
run_id, pipeline, work = e["RUN_ID"], e["PIPELINE"], e["WORK"]
shards, tasks = int(e["SHARDS"]), int(e["TASKS"])
r["jobName"] = f"winback-{run_id}-{stage}"
r["jobQueue"] = e["QUEUE"]
r["jobDefinition"] = e["DEFINITION"]
r["parameters"].update(pipeline=pipeline, work=work, shards=str(shards))
r.setdefault("tags", {})["winback-run"] = run_id
command = {
    "partition": ["winback", "partition", pipeline, "--work", work, "--shards", str(shards), "--tasks", str(tasks)],
    "shard": ["winback", "run", pipeline, "--work", work, "--shards", str(shards)],
    "merge": None,
}[stage]
size = {"partition": tasks, "shard": shards, "merge": 1}[stage]
if stage != "merge":
    if size >= 2:
        r["arrayProperties"] = {"size": size}
    else:
        r.pop("arrayProperties", None)
        command += ["--task" if stage == "partition" else "--shard", "0"]
        r.setdefault("containerOverrides", {})["command"] = command
    if stage == "partition":
        r.setdefault("containerOverrides", {})["command"] = command
if dependency:
    r["dependsOn"] = [{"jobId": dependency}]
else:
    r.pop("dependsOn", None)
print(json.dumps(r, separators=(",", ":")))
PY
}

if ((dry)); then
    request partition
    request shard 00000000-0000-4000-8000-000000000001
    request merge 00000000-0000-4000-8000-000000000002
    exit 0
fi

command -v aws >/dev/null || die 69 "the AWS CLI (aws) is not installed"
submitted=()
submit() { # submit VAR STAGE [DEPENDENCY]
    local var=$1 id
    if ! id=$(aws batch submit-job --cli-input-json "$(request "$2" "${3:-}")" --query jobId --output text); then
        ((${#submitted[@]} == 0)) || aws batch cancel-job --job-id "${submitted[0]}" --reason "submit.sh: a later submission failed" >/dev/null || true
        die 69 "submitting the $2 job failed"
    fi
    submitted+=("$id")
    printf -v "$var" '%s' "$id"
}
part_job="" shard_job="" merge_job=""
submit part_job partition
submit shard_job shard "$part_job"
submit merge_job merge "$shard_job"
log "run $run_id: partition $part_job ($tasks), shard $shard_job ($shards), merge $merge_job"
if ((!wait)); then
    printf '%s %s %s\n' "$part_job" "$shard_job" "$merge_job"
    exit 0
fi

# Waits for the merge job, then reports.
while :; do
    status=$(aws batch describe-jobs --jobs "$merge_job" --query 'jobs[0].status' --output text)
    [[ $status == SUCCEEDED || $status == FAILED ]] && break
    sleep "$poll"
done
if [[ $status == SUCCEEDED ]]; then
    log "merge $merge_job succeeded: run $run_id published"
    exit 0
fi

reason=$(aws batch describe-jobs --jobs "$merge_job" --query 'jobs[0].statusReason' --output text)
code=$(aws batch describe-jobs --jobs "$merge_job" --query 'jobs[0].container.exitCode' --output text)
if [[ $code =~ ^[0-9]+$ ]]; then
    log "merge $merge_job failed with exit $code ($reason); logs: CloudWatch group /aws/batch/job"
    ((code != 0)) || code=1
    exit "$code"
fi

log "merge $merge_job did not run ($reason): a job it depends on failed; nothing was published"
first=0
for pair in "partition:$part_job" "shard:$shard_job"; do
    stage=${pair%%:*} id=${pair#*:}
    if [[ $stage == partition && $tasks == 1 || $stage == shard && $shards == 1 ]]; then
        # shellcheck disable=SC2016 # backquotes are JMESPath literals
        lines=$(aws batch describe-jobs --jobs "$id" \
            --query 'jobs[?status==`FAILED`].[jobId, `0`, container.exitCode, statusReason]' --output text)
    else
        lines=$(aws batch list-jobs --array-job-id "$id" --job-status FAILED \
            --query 'jobSummaryList[].[jobId, arrayProperties.index, container.exitCode, statusReason]' --output text)
    fi
    while IFS=$'\t' read -r child index exit_code why; do
        [[ -n $child ]] || continue
        log "$stage child $index ($child) failed: exit $exit_code, $why"
        if ((first == 0)) && [[ $exit_code =~ ^[1-9][0-9]*$ ]]; then first=$exit_code; fi
    done <<<"$lines"
done
((first != 0)) || first=1
exit "$first"
