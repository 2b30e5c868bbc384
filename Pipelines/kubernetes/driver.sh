#!/usr/bin/env bash
# The driver of a Kubernetes run (docs/rules.md §8): run by the CronJob winback-nightly, it
# creates three Jobs one after the other and waits for each with kubectl wait:
#   1. winback-RUN-partition   Indexed Job, completions M: winback partition ... --tasks M
#   2. winback-RUN-shard       Indexed Job, completions N: winback run ... --shards N
#   3. winback-RUN-merge       one pod: winback merge ... (publishes the run)
# Each pod takes its index from JOB_COMPLETION_INDEX, which Kubernetes sets in Indexed Jobs.
# A stage that fails stops the run before the next one is created, so nothing is published.
#
#   driver.sh           run
#   driver.sh --print   print the three Job manifests and create nothing (validate.sh uses it)
#
# Settings (environment, set in cronjob.yaml):
#   WINBACK_IMAGE              image holding winback (required)
#   WINBACK_SHARDS             N, shards (default 8)
#   WINBACK_TASKS              M, partition tasks (default 4)
#   WINBACK_MAX_PARALLEL       at most this many pods of one stage at once (default: all)
#   WINBACK_CPU                CPU request of a task pod (default 1)
#   WINBACK_MEMORY             memory request and limit of a task pod (default 2Gi); keep the
#                              pipeline's limits.memory below it
#   WINBACK_RETRIES_PER_INDEX  retries of one failed index (backoffLimitPerIndex, default 2)
#   WINBACK_TIMEOUT            how long one stage may take (default 6h)
#   WINBACK_PVC                the ReadWriteMany claim (default winback-shared)
#   WINBACK_SHARED             where it is mounted, here and in the task pods (default /shared)
#   WINBACK_PIPELINE           the pipeline file (default /config/pipeline.yaml)
#   WINBACK_RUN_ID             names the Jobs and the work folder (default: UTC date and time)
#   WINBACK_AS_OF              passed to every task as --as-of (default none: the pipeline's
#                              asOf); "run-day" = the UTC date the driver started, so that with
#                              `asOf: today` tasks running past midnight agree (cronjob.yaml)
#   WINBACK_KEEP_WORK          "true" keeps the work folder of a successful run
#   POD_NAMESPACE              the namespace (default: the service account's)
set -euo pipefail

print_only=0
case ${1:-} in
    --print) print_only=1 ;;
    "") ;;
    *) echo "usage: driver.sh [--print]" >&2; exit 64 ;;
esac

image=${WINBACK_IMAGE:-}
shards=${WINBACK_SHARDS:-8}
tasks=${WINBACK_TASKS:-4}
max_parallel=${WINBACK_MAX_PARALLEL:-}
cpu=${WINBACK_CPU:-1}
memory=${WINBACK_MEMORY:-2Gi}
retries=${WINBACK_RETRIES_PER_INDEX:-2}
timeout=${WINBACK_TIMEOUT:-6h}
pvc=${WINBACK_PVC:-winback-shared}
shared=${WINBACK_SHARED:-/shared}
source_pipeline=${WINBACK_PIPELINE:-/config/pipeline.yaml}
run_id=${WINBACK_RUN_ID:-$(date -u +%Y%m%d-%H%M%S)}
namespace=${POD_NAMESPACE:-}
if [[ -z $namespace && -r /var/run/secrets/kubernetes.io/serviceaccount/namespace ]]; then
    namespace=$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace)
fi

die() {
    echo "driver: $*" >&2
    exit 1
}
log() { echo "driver: $(date -u +%H:%M:%S) $*" >&2; }

[[ -n $image ]] || die "WINBACK_IMAGE is not set"
[[ $shards =~ ^[1-9][0-9]*$ ]] || die "WINBACK_SHARDS must be a positive integer, not '$shards'"
[[ $tasks =~ ^[1-9][0-9]*$ ]] || die "WINBACK_TASKS must be a positive integer, not '$tasks'"
[[ $retries =~ ^[0-9]+$ ]] || die "WINBACK_RETRIES_PER_INDEX must be an integer, not '$retries'"
[[ -z $max_parallel || $max_parallel =~ ^[1-9][0-9]*$ ]] || die "WINBACK_MAX_PARALLEL must be a positive integer"
[[ $run_id =~ ^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$ ]] || die "WINBACK_RUN_ID must be lowercase letters, digits and '-' (at most 40)"

work="$shared/work/$run_id"
pipeline="$work/pipeline.yaml"

quote() { # one YAML flow-sequence item
    local s=${1//\\/\\\\}
    printf '"%s"' "${s//\"/\\\"}"
}

# job STAGE COMPLETIONS WINBACK-ARGUMENTS...: the manifest of one stage's Job.
job() {
    local stage=$1 completions=$2 parallel args="" a
    shift 2
    for a in winback "$@"; do args+="${args:+, }$(quote "$a")"; done
    parallel=$completions
    if [[ -n $max_parallel ]] && ((max_parallel < completions)); then parallel=$max_parallel; fi
    cat <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: winback-$run_id-$stage
  labels:
    app.kubernetes.io/name: winback
    app.kubernetes.io/component: $stage
    winback/run: "$run_id"
spec:
  completionMode: Indexed
  completions: $completions
  parallelism: $parallel
  # A failed index is retried on its own; once one index has used up its retries the Job
  # fails (maxFailedIndexes 0) and the driver stops the run.
  backoffLimitPerIndex: $retries
  maxFailedIndexes: 0
  podFailurePolicy:
    rules:
      # Bad data, missing input, bad configuration: retrying cannot help (sysexits 64-66, 78).
      - action: FailIndex
        onExitCodes:
          containerName: winback
          operator: In
          values: [64, 65, 66, 78]
      # A pod evicted by a node drain or preemption does not count as a failure.
      - action: Ignore
        onPodConditions:
          - type: DisruptionTarget
            status: "True"
  ttlSecondsAfterFinished: 604800
  template:
    metadata:
      labels:
        app.kubernetes.io/name: winback
        app.kubernetes.io/component: $stage
        winback/run: "$run_id"
    spec:
      restartPolicy: Never
      containers:
        - name: winback
          image: $image
          command: [$args]
          resources:
            requests:
              cpu: "$cpu"
              memory: $memory
            limits:
              memory: $memory
          securityContext:
            allowPrivilegeEscalation: false
          volumeMounts:
            - name: shared
              mountPath: $shared
      volumes:
        - name: shared
          persistentVolumeClaim:
            claimName: $pvc
EOF
}

as_of=()
[[ ${WINBACK_AS_OF:-} != run-day ]] || WINBACK_AS_OF=$(date -u +%F)
[[ -z ${WINBACK_AS_OF:-} ]] || as_of=(--as-of "$WINBACK_AS_OF")
partition_job() { job partition "$tasks" partition "$pipeline" --work "$work" --shards "$shards" --tasks "$tasks" "${as_of[@]}"; }
shard_job() { job shard "$shards" run "$pipeline" --work "$work" --shards "$shards" "${as_of[@]}"; }
merge_job() { job merge 1 merge "$pipeline" --work "$work" --shards "$shards" "${as_of[@]}"; }

if ((print_only)); then
    partition_job
    echo ---
    shard_job
    echo ---
    merge_job
    exit 0
fi

command -v kubectl >/dev/null || die "kubectl is not in this image"
kube=(kubectl)
[[ -z $namespace ]] || kube+=(--namespace "$namespace")

# Waits for a Job to complete or fail; returns 0 when it completed.
wait_for() {
    local name=$1 complete failed conditions
    "${kube[@]}" wait --for=condition=complete "job/$name" --timeout="$timeout" >/dev/null 2>&1 &
    complete=$!
    "${kube[@]}" wait --for=condition=failed "job/$name" --timeout="$timeout" >/dev/null 2>&1 &
    failed=$!
    wait -n "$complete" "$failed" || true
    kill "$complete" "$failed" 2>/dev/null || true
    wait "$complete" "$failed" 2>/dev/null || true
    conditions=$("${kube[@]}" get "job/$name" -o jsonpath='{.status.conditions[?(@.status=="True")].type}')
    [[ " $conditions " == *" Complete "* ]] && return 0
    log "job $name did not complete (conditions: ${conditions:-none within $timeout})"
    log "failed indexes: $("${kube[@]}" get "job/$name" -o jsonpath='{.status.failedIndexes}')"
    log "logs: kubectl logs -n ${namespace:-NAMESPACE} -l batch.kubernetes.io/job-name=$name --prefix --tail=50"
    return 1
}

stage() {
    local name="winback-$run_id-$1"
    shift
    "$@" | "${kube[@]}" create -f - >/dev/null
    log "created job $name; waiting (at most $timeout)"
    wait_for "$name" || die "stage $name failed: the run stops here and nothing is published"
    log "job $name complete"
}

log "run $run_id: $tasks partition tasks, $shards shards, work folder $work"
mkdir -p "$work"
cp "$source_pipeline" "$pipeline.tmp"
mv "$pipeline.tmp" "$pipeline"

stage partition partition_job
stage shard shard_job
stage merge merge_job
log "run $run_id published"

if [[ ${WINBACK_KEEP_WORK:-false} != true ]]; then
    rm -rf "$work"
fi
