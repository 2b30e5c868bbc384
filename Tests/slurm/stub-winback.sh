#!/usr/bin/env bash
# A stand-in for the winback executable, for proving the Slurm harness and
# Pipelines/slurm/nightly.sh without the real pipeline. It implements, trivially but with the
# same contract (docs/rules.md §8 and §8.1):
#   generate --customers C --seed S --out DIR    a "world": input-*.txt files and pipeline.yaml
#   partition PIPELINE --work W --shards N [--task i] --tasks M
#   run PIPELINE --work W [--shard k] --shards N
#   run PIPELINE [--output DIR]                  the in-memory run
#   merge PIPELINE --work W --shards N
# The index defaults to SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX, AWS_BATCH_JOB_ARRAY_INDEX.
# Every task writes through temporary names, then leaves a _SUCCESS marker; run --shard and
# merge exit 66 naming a missing task, and 78 when N or M differ between stages.
#
# Knobs (environment):
#   WINBACK_STUB_FAIL   comma-separated STAGE:INDEX:STATUS, e.g. "partition:1:65,merge:-:66":
#                       that task exits with STATUS before writing anything.
#   WINBACK_STUB_SLEEP  seconds each task sleeps first (default 0), so tasks overlap.
#   WINBACK_STUB_TRACE  a file each task appends "stage index host" to.
set -euo pipefail

die() {
    local status=$1
    shift
    printf 'winback (stub): %s\n' "$*" >&2
    exit "$status"
}

[[ $# -ge 1 ]] || die 64 "usage: stub-winback.sh generate|partition|run|merge ..."
cmd=$1
shift

pipeline="" work="" shards="" tasks="" task="" shard="" output="" customers=10 seed=1 out=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --work) work=$2; shift 2 ;;
        --shards) shards=$2; shift 2 ;;
        --tasks) tasks=$2; shift 2 ;;
        --task) task=$2; shift 2 ;;
        --shard) shard=$2; shift 2 ;;
        --output) output=$2; shift 2 ;;
        --customers) customers=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --quiet) shift ;;
        -*) die 64 "unknown option $1" ;;
        *) pipeline=$1; shift ;;
    esac
done

scheduler_index() {
    local v
    for v in SLURM_ARRAY_TASK_ID JOB_COMPLETION_INDEX AWS_BATCH_JOB_ARRAY_INDEX; do
        if [[ -n ${!v:-} ]]; then
            printf '%s\n' "${!v}"
            return 0
        fi
    done
    return 1
}

# Injected failure for this stage and index ("-" for merge and the in-memory run).
maybe_fail() {
    local stage=$1 index=$2 spec s i status
    IFS=',' read -r -a spec <<<"${WINBACK_STUB_FAIL:-}"
    for s in "${spec[@]}"; do
        IFS=':' read -r s i status <<<"$s"
        if [[ $s == "$stage" && $i == "$index" ]]; then
            die "${status:-1}" "injected failure: $stage task $index exits ${status:-1}"
        fi
    done
}

trace() {
    if [[ -n ${WINBACK_STUB_TRACE:-} ]]; then
        printf '%s %s %s\n' "$1" "$2" "$(hostname)" >>"$WINBACK_STUB_TRACE"
    fi
    sleep "${WINBACK_STUB_SLEEP:-0}"
}

# Reads name and output.directory from the stub's own pipeline.yaml.
pipeline_name() { sed -n 's/^name: *//p' "$pipeline"; }
pipeline_output() {
    local dir
    dir=$(sed -n 's/^  directory: *//p' "$pipeline")
    [[ $dir == /* ]] || dir="$(cd "$(dirname "$pipeline")" && pwd)/$dir"
    printf '%s\n' "$dir"
}
inputs() { find "$(dirname "$pipeline")" -maxdepth 1 -name 'input-*.txt' | LC_ALL=C sort; }
shard_of() { printf '%s' "$1" | cksum | awk -v n="$2" '{ print $1 % n }'; }

# Publishes the contents of $1 (a finished folder) as <output>/<name>/<date> and latest.
publish() {
    local staged=$1 root dest
    root="${output:-$(pipeline_output)}/$(pipeline_name)"
    mkdir -p "$root"
    dest=".run-$(date -u +%Y%m%d%H%M%S)-$$"
    mv "$staged" "$root/$dest"
    ln -sfn "$dest" "$root/.2026-11-22.tmp$$" && mv -T "$root/.2026-11-22.tmp$$" "$root/2026-11-22"
    ln -sfn 2026-11-22 "$root/.latest.tmp$$" && mv -T "$root/.latest.tmp$$" "$root/latest"
    printf '%s\n' "$root/2026-11-22"
}

manifest() { printf '{"stub":true,"pid":%s,"mode":"%s"}\n' "$$" "$1"; }

case $cmd in
    generate)
        [[ -n $out ]] || die 64 "generate needs --out"
        mkdir -p "$out"
        for f in 1 2 3 4 5 6 7; do
            for ((c = 0; c < customers / 7 + 1; c++)); do
                printf 'customer-%d-%d,seed-%s,file-%d\n' "$c" "$((c * f % 11))" "$seed" "$f"
            done >"$out/input-$f.txt"
        done
        printf 'name: stub\noutput:\n  directory: out\n' >"$out/pipeline.yaml"
        echo "wrote a stub world to $out"
        ;;
    partition)
        [[ -n $pipeline && -n $work && -n $shards && -n $tasks ]] || die 64 "partition needs PIPELINE --work --shards --tasks"
        [[ -n $task ]] || task=$(scheduler_index) || die 64 "no --task and no scheduler index variable"
        trace partition "$task"
        maybe_fail partition "$task"
        dir="$work/parts/task-$task"
        tmp="$work/parts/.task-$task.tmp$$"
        rm -rf "$tmp"
        mkdir -p "$tmp"
        k=0
        while read -r file; do
            if ((k % tasks == task)); then
                while IFS= read -r line; do
                    printf '%s\n' "$line" >>"$tmp/shard-$(shard_of "$line" "$shards").part"
                done <"$file"
            fi
            k=$((k + 1))
        done < <(inputs)
        printf 'shards=%s\ntasks=%s\n' "$shards" "$tasks" >"$tmp/_SUCCESS"
        rm -rf "$dir"
        mv "$tmp" "$dir"
        ;;
    run)
        [[ -n $pipeline ]] || die 64 "run needs PIPELINE"
        if [[ -z $work ]]; then
            trace run -
            maybe_fail run -
            staged=$(mktemp -d)
            mkdir -p "$staged/segments"
            while read -r file; do cat "$file"; done < <(inputs) | LC_ALL=C sort >"$staged/segments/all.csv"
            manifest inmemory >"$staged/manifest.json"
            publish "$staged"
            exit 0
        fi
        [[ -n $shards ]] || die 64 "run --work needs --shards"
        [[ -n $shard ]] || shard=$(scheduler_index) || die 64 "no --shard and no scheduler index variable"
        trace run "$shard"
        maybe_fail run "$shard"
        m=""
        for marker in "$work"/parts/task-*/_SUCCESS; do
            [[ -e $marker ]] || die 66 "no partition task has finished in $work/parts"
            [[ $(sed -n 's/^shards=//p' "$marker") == "$shards" ]] || die 78 "$marker was written for another --shards"
            m=$(sed -n 's/^tasks=//p' "$marker")
        done
        for ((t = 0; t < m; t++)); do
            [[ -e $work/parts/task-$t/_SUCCESS ]] || die 66 "partition task $t has not finished"
        done
        tmp="$work/shards/.$shard.tmp$$"
        rm -rf "$tmp"
        mkdir -p "$tmp"
        cat "$work"/parts/task-*/"shard-$shard.part" 2>/dev/null | LC_ALL=C sort >"$tmp/segments.csv" || true
        printf 'shards=%s\n' "$shards" >"$tmp/_SUCCESS"
        rm -rf "$work/shards/$shard"
        mv "$tmp" "$work/shards/$shard"
        ;;
    merge)
        [[ -n $pipeline && -n $work && -n $shards ]] || die 64 "merge needs PIPELINE --work --shards"
        trace merge -
        maybe_fail merge -
        for ((s = 0; s < shards; s++)); do
            [[ -e $work/shards/$s/_SUCCESS ]] || die 66 "shard task $s has not finished"
            [[ $(sed -n 's/^shards=//p' "$work/shards/$s/_SUCCESS") == "$shards" ]] || die 78 "shard $s was run with another --shards"
        done
        staged="$work/.merge.tmp$$"
        rm -rf "$staged"
        mkdir -p "$staged/segments"
        for ((s = 0; s < shards; s++)); do cat "$work/shards/$s/segments.csv"; done | LC_ALL=C sort >"$staged/segments/all.csv"
        manifest merged >"$staged/manifest.json"
        publish "$staged"
        touch "$work/_SUCCESS"
        ;;
    *) die 64 "unknown command $cmd" ;;
esac
