#!/usr/bin/env bash
# Runs a winback pipeline past one machine as three Slurm jobs (docs/rules.md §8):
#   1. a partition array of M tasks      winback partition PIPELINE --work DIR --shards N --tasks M
#   2. a shard array of N tasks          winback run PIPELINE --work DIR --shards N
#      (afterok on the whole partition array)
#   3. one merge job                     winback merge PIPELINE --work DIR --shards N
#      (afterok on the whole shard array)
# then waits for the merge and exits with its status. Run ./nightly.sh --help for the options.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: nightly.sh PIPELINE.yaml --work DIR --shards N --tasks M [options]

Submits a winback run to Slurm as three dependent jobs, waits for the last one and exits
with its status:
  partition   job array 0..M-1: task i splits its share of the input files into per-shard
              part files under DIR/parts/
  shard       job array 0..N-1, started once every partition task succeeded: task k
              evaluates shard k into DIR/shards/k/
  merge       one job, started once every shard task succeeded: merges the shards and
              publishes the run atomically, as `winback run` would
Each task takes its index from SLURM_ARRAY_TASK_ID. Every job is submitted with
--kill-on-invalid-dep=yes, so a failed task cancels the jobs that depend on it, and nothing
is published.

Arguments and options:
  PIPELINE.yaml     the pipeline file; it, its inputs and its output directory must be on
                    a filesystem every compute node sees at the same path
  --work DIR        work folder on that shared filesystem (part files, shard outputs, task
                    markers); use a fresh one per run, e.g. /shared/winback/work/$(date +%F).
                    Task logs go to DIR/logs/ (partition-JOB_TASK.log, shard-JOB_TASK.log,
                    merge-JOB.log), and each task's exit status to DIR/logs/*.status
  --shards N        how many shards the customers are split into (memory per shard task
                    is about the whole run's divided by N)
  --tasks M         how many partition tasks read the input files (file k goes to task
                    k mod M); at most the number of input files is useful
  --partition P     Slurm partition for all three jobs (default: the cluster's default)
  --time T          time limit of each task, in any sbatch --time form, e.g. 02:00:00
                    (default: the partition's)
  --as-of WHEN      passed to every task (winback's --as-of: YYYY-MM-DD, ...); with
                    `asOf: today` in the pipeline, --as-of "$(date -u +%F)" pins the day for
                    tasks that start after midnight
  --sbatch-arg ARG  one more argument for every sbatch call, e.g. --sbatch-arg=--mem=8G
                    or --sbatch-arg=--account=analytics; may be repeated
  --poll SECONDS    how often to ask Slurm whether the merge has finished (default 15)
  -h, --help        this help

Environment:
  WINBACK           the winback executable (default: `winback` on PATH); it must exist at
                    the same path on the compute nodes
  SLURM_CONF        as for every Slurm command

Exit status: the merge's exit status (0 success; sysexits codes otherwise, e.g. 66 a task's
outputs are missing, 78 mismatched configuration). When the merge never ran because a
partition or shard task failed, the failed tasks are named with their logs and the status is
that of the first failed task (1 when it has none, e.g. cancelled or out of time). 64 for a
usage error, 69 when Slurm cannot be reached or a submission is refused. Interrupting
nightly.sh (SIGINT, SIGTERM) cancels the jobs it submitted.
EOF
}

die() {
    local status=$1
    shift
    printf 'nightly.sh: %s\n' "$*" >&2
    exit "$status"
}

log() { printf 'nightly.sh: %s\n' "$*" >&2; }

pipeline="" work="" shards="" tasks="" partition="" time_limit="" poll=15
extra=() as_of=()
while [[ $# -gt 0 ]]; do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --work | --shards | --tasks | --partition | --time | --sbatch-arg | --poll | --as-of)
            [[ $# -ge 2 ]] || die 64 "$1 needs a value (see --help)"
            opt=$1 val=$2
            shift 2
            ;;
        --work=* | --shards=* | --tasks=* | --partition=* | --time=* | --sbatch-arg=* | --poll=* | --as-of=*)
            opt=${1%%=*} val=${1#*=}
            shift
            ;;
        -*) die 64 "unknown option $1 (see --help)" ;;
        *)
            [[ -z $pipeline ]] || die 64 "one pipeline file only, got '$pipeline' and '$1'"
            pipeline=$1
            shift
            continue
            ;;
    esac
    case $opt in
        --work) work=$val ;;
        --shards) shards=$val ;;
        --tasks) tasks=$val ;;
        --partition) partition=$val ;;
        --time) time_limit=$val ;;
        --sbatch-arg) extra+=("$val") ;;
        --poll) poll=$val ;;
        --as-of) as_of=(--as-of "$val") ;;
    esac
done

[[ -n $pipeline ]] || die 64 "no pipeline file (see --help)"
[[ -n $work ]] || die 64 "no --work DIR (see --help)"
[[ $shards =~ ^[1-9][0-9]*$ ]] || die 64 "--shards needs a positive integer, got '$shards'"
[[ $tasks =~ ^[1-9][0-9]*$ ]] || die 64 "--tasks needs a positive integer, got '$tasks'"
[[ $poll =~ ^[0-9]+([.][0-9]+)?$ ]] || die 64 "--poll needs a number of seconds, got '$poll'"
[[ -r $pipeline ]] || die 66 "cannot read the pipeline file $pipeline"

winback=${WINBACK:-}
if [[ -z $winback ]]; then
    winback=$(command -v winback) || die 69 "winback is neither on PATH nor named by \$WINBACK"
fi
[[ -x $winback ]] || die 69 "$winback is not executable"
for tool in sbatch scontrol scancel; do
    command -v "$tool" >/dev/null || die 69 "$tool not found: is this a Slurm submit host?"
done

# Absolute paths: the jobs start in another directory, on another machine.
abspath() { (cd "$(dirname "$1")" && printf '%s/%s\n' "$(pwd -P)" "$(basename "$1")"); }
pipeline=$(abspath "$pipeline")
winback=$(abspath "$winback")
mkdir -p "$work/logs"
work=$(cd "$work" && pwd -P)
logs="$work/logs"

# The batch script every task runs: the winback command line comes as its arguments, so no
# quoting is involved; it records the exit status beside the log.
task_script="$logs/task.sh"
cat >"$task_script.tmp$$" <<'EOF'
#!/usr/bin/env bash
# Written by Pipelines/slurm/nightly.sh: runs one winback task, records its exit status.
logs=$1
shift
"$@"
status=$?
name="${SLURM_JOB_NAME##*-}-${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}"
[[ -z ${SLURM_ARRAY_TASK_ID:-} ]] || name="${name}_$SLURM_ARRAY_TASK_ID"
printf '%s\n' "$status" >"$logs/$name.status"
exit "$status"
EOF
chmod +x "$task_script.tmp$$"
mv "$task_script.tmp$$" "$task_script"

common=(--parsable --kill-on-invalid-dep=yes --chdir="$work")
[[ -z $partition ]] || common+=(--partition="$partition")
[[ -z $time_limit ]] || common+=(--time="$time_limit")
common+=("${extra[@]}")

submitted=()
# shellcheck disable=SC2317 # invoked by the trap
cancel_submitted() {
    if ((${#submitted[@]})); then
        log "interrupted: cancelling jobs ${submitted[*]}"
        scancel "${submitted[@]}" || true
    fi
    exit 130
}
trap cancel_submitted INT TERM

# submit VAR SBATCH-ARGS...: submits one job and stores its id in VAR; on a refusal, cancels
# the jobs already submitted.
submit() {
    local var=$1 out id
    shift
    if ! out=$(sbatch "${common[@]}" "$@" 2>&1); then
        if ((${#submitted[@]})); then scancel "${submitted[@]}" || true; fi
        die 69 "sbatch refused the job: $out"
    fi
    id=${out##*$'\n'} # the last line, after any warnings
    id=${id%%;*}       # --parsable prints "jobid" or "jobid;cluster"
    if [[ ! $id =~ ^[0-9]+$ ]]; then
        if ((${#submitted[@]})); then scancel "${submitted[@]}" || true; fi
        die 69 "unexpected sbatch output: $out"
    fi
    submitted+=("$id")
    printf -v "$var" '%s' "$id"
}

name=$(basename "$pipeline" .yaml)
part_job="" shard_job="" merge_job=""
submit part_job --job-name="winback-$name-partition" --array="0-$((tasks - 1))" \
    --output="$logs/partition-%A_%a.log" \
    "$task_script" "$logs" "$winback" partition "$pipeline" --work "$work" --shards "$shards" --tasks "$tasks" "${as_of[@]}"
submit shard_job --job-name="winback-$name-shard" --array="0-$((shards - 1))" \
    --dependency="afterok:$part_job" --output="$logs/shard-%A_%a.log" \
    "$task_script" "$logs" "$winback" run "$pipeline" --work "$work" --shards "$shards" "${as_of[@]}"
submit merge_job --job-name="winback-$name-merge" \
    --dependency="afterok:$shard_job" --output="$logs/merge-%j.log" \
    "$task_script" "$logs" "$winback" merge "$pipeline" --work "$work" --shards "$shards" "${as_of[@]}"
log "submitted partition $part_job (array 0-$((tasks - 1))), shard $shard_job (array 0-$((shards - 1))), merge $merge_job; logs in $logs"

terminal='^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE|REVOKED|SPECIAL_EXIT)'

# Prints one line "TASK STATE EXIT:SIGNAL" per task of a job ("-" as TASK for a job that is
# not an array, "0-3" for an array record not yet split into tasks). Asks slurmctld while it
# still knows the job (MinJobAge), else the accounting database, else the status files the
# tasks wrote. Returns 2 when slurmctld cannot be reached (ask again later), 1 when nothing
# knows the job.
job_states() {
    local id=$1 out
    if out=$(scontrol show job -o "$id" 2>&1); then
        awk '{
            task = "-"; state = "?"; code = "?"
            for (i = 1; i <= NF; i++) {
                if ($i ~ /^ArrayTaskId=/) task = substr($i, 13)
                else if ($i ~ /^JobState=/) state = substr($i, 10)
                else if ($i ~ /^ExitCode=/) code = substr($i, 10)
            }
            print task, state, code
        }' <<<"$out"
        return 0
    fi
    [[ $out == *"Invalid job id"* ]] || return 2
    if out=$(sacct -n -X -P -j "$id" -o JobID,State,ExitCode 2>/dev/null) && [[ -n $out ]]; then
        awk -F'|' '{
            task = "-"; n = index($1, "_"); if (n) task = substr($1, n + 1)
            split($2, s, " "); print task, s[1], $3
        }' <<<"$out"
        return 0
    fi
    local f task found=1
    for f in "$logs"/*-"$id".status "$logs"/*-"$id"_*.status; do
        [[ -e $f ]] || continue
        task=$(basename "$f" .status)
        if [[ $task == *_* ]]; then task=${task##*_}; else task=-; fi
        if [[ $(cat "$f") == 0 ]]; then
            echo "$task COMPLETED 0:0"
        else
            echo "$task FAILED $(cat "$f"):0"
        fi
        found=0
    done
    return "$found"
}

# Waits for the merge job to reach a terminal state, or to be forgotten by Slurm without a
# trace (state GONE).
unreachable=0
while :; do
    rc=0
    merge_state=$(job_states "$merge_job") || rc=$?
    if ((rc == 2)); then
        ((unreachable++ % 20 == 0)) && log "cannot reach slurmctld; still waiting for merge $merge_job"
        sleep "$poll"
        continue
    fi
    unreachable=0
    if ((rc == 1)); then
        state=GONE code='?'
        break
    fi
    read -r _ state code <<<"${merge_state%%$'\n'*}"
    [[ $state =~ $terminal ]] && break
    sleep "$poll"
done
trap - INT TERM

exit_of() { # "EXIT:SIGNAL" -> a shell exit status
    local rc=${1%%:*} sig=${1##*:}
    [[ $rc =~ ^[0-9]+$ ]] || rc=1
    [[ $sig =~ ^[0-9]+$ ]] || sig=0
    if ((rc == 0 && sig != 0)); then rc=$((128 + sig)); fi
    printf '%s\n' "$rc"
}

if [[ $state == COMPLETED* ]]; then
    log "merge $merge_job completed; log: $logs/merge-$merge_job.log"
    exit 0
fi

status=$(exit_of "$code")
if [[ $state == FAILED* || ($state != CANCELLED* && $state != GONE && $status != 0) ]]; then
    log "merge $merge_job ended $state with exit $status; log: $logs/merge-$merge_job.log"
    ((status != 0)) || status=1
    exit "$status"
fi

# The merge was cancelled (or never ran): name the tasks that failed.
first=0
report() {
    local stage=$1 id=$2 task st cd rc label states
    states=$(job_states "$id") || true
    while read -r task st cd; do
        [[ $st == COMPLETED* || -z $st ]] && continue
        rc=$(exit_of "$cd")
        if [[ $task == - ]]; then label="$id"; else label="${id}_$task"; fi
        if [[ $st == CANCELLED* || $st == PENDING* ]]; then
            if [[ $task == *-* ]]; then label="$id (tasks $task)"; fi
            log "$stage job $label did not run ($st)"
            continue
        fi
        log "$stage task $label ended $st with exit $rc; log: $logs/$stage-$label.log"
        if ((first == 0)); then first=$rc; ((first != 0)) || first=1; fi
    done <<<"$states"
}
if [[ $state == GONE ]]; then
    log "Slurm no longer knows merge $merge_job (MinJobAge), there is no accounting for it and it wrote no status file: it did not run"
else
    log "merge $merge_job did not run ($state): a job it depends on failed; nothing was published"
fi
report partition "$part_job"
report shard "$shard_job"
if ((first == 0)); then
    if [[ $state == GONE ]]; then first=69; else first=1; fi
fi
exit "$first"
