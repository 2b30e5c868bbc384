#!/usr/bin/env bash
# Runs Pipelines/slurm/nightly.sh against a real, throwaway Slurm cluster of one node on
# loopback (slurmctld + slurmd + munged, all state under a temporary folder), and checks
# that a run split into partition, shard and merge jobs publishes exactly what an in-memory
# run publishes, and that a failed task fails the run and publishes nothing.
#
#   Tests/slurm/run-slurm-test.sh           with $WINBACK (default .build/debug/winback)
#   Tests/slurm/run-slurm-test.sh --stub    with Tests/slurm/stub-winback.sh instead, which
#                                           proves the harness and nightly.sh on their own
#
# Needs root (to install Slurm and munge from the distribution when missing, and to run the
# daemons). When they cannot be installed it prints "slurm test skipped: <reason>" and exits 0.
# Ends with "slurm: N passed, M failed"; exits non-zero when anything failed.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
stub=0
for arg in "$@"; do
    case $arg in
        --stub) stub=1 ;;
        -h | --help)
            sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *) echo "usage: $0 [--stub]" >&2; exit 64 ;;
    esac
done

skip() {
    echo "slurm test skipped: $*"
    exit 0
}

# ---- Slurm and munge from the distribution -------------------------------------------------

missing=()
for tool in slurmctld slurmd sbatch squeue sinfo scontrol scancel munged mungekey; do
    command -v "$tool" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
export PATH="$PATH:/usr/sbin:/sbin"
if ((${#missing[@]})); then
    [[ $(id -u) == 0 ]] || skip "${missing[*]} not installed and not root, so cannot apt-get install them"
    command -v apt-get >/dev/null 2>&1 || skip "${missing[*]} not installed and no apt-get here"
    echo "installing slurmctld slurmd slurm-client munge (missing: ${missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null 2>&1 || skip "apt-get update failed"
    apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null 2>&1 ||
        skip "apt-get install slurmctld slurmd slurm-client munge failed"
    # The packages' own services must not run: this test starts its own daemons.
    for tool in slurmctld slurmd sbatch munged mungekey; do
        command -v "$tool" >/dev/null 2>&1 || skip "$tool still missing after installing the packages"
    done
fi
[[ $(id -u) == 0 ]] || skip "the Slurm daemons of this test run as root (SlurmUser=root)"

if ((stub)); then
    WINBACK="$repo/Tests/slurm/stub-winback.sh"
else
    WINBACK=${WINBACK:-$repo/.build/debug/winback}
    [[ -x $WINBACK ]] || { echo "slurm: no winback executable at $WINBACK (build it, or set WINBACK)" >&2; exit 1; }
    if ! "$WINBACK" help partition >/dev/null 2>&1; then
        echo "slurm: $WINBACK has no partition command; run with --stub to test the harness alone" >&2
        exit 1
    fi
fi
WINBACK=$(cd "$(dirname "$WINBACK")" && pwd)/$(basename "$WINBACK")
export WINBACK
nightly="$repo/Pipelines/slurm/nightly.sh"

# ---- A one-node cluster under a temporary folder -------------------------------------------

tmp=$(mktemp -d /tmp/winback-slurm.XXXXXX)
chmod 700 "$tmp"
host=$(hostname -s)
export SLURM_CONF="$tmp/etc/slurm.conf"
unset SLURM_JOB_ID SLURM_ARRAY_TASK_ID JOB_COMPLETION_INDEX AWS_BATCH_JOB_ARRAY_INDEX

pid_of() { [[ -s $1 ]] && cat "$1"; }

stop_pid() { # pid file, name
    local pid
    pid=$(pid_of "$1") || return 0
    kill -0 "$pid" 2>/dev/null || return 0
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.2
    done
    echo "slurm: $2 (pid $pid) ignored SIGTERM; sending SIGKILL" >&2
    kill -9 "$pid" 2>/dev/null || true
}

cleanup() {
    local status=$?
    set +e
    if [[ -n $(pid_of "$tmp/run/slurmctld.pid") ]]; then
        # No job may outlive the cluster: cancel them all and let slurmd reap their steps.
        local jobs
        jobs=$(squeue -h -o %A 2>/dev/null | sort -u)
        if [[ -n $jobs ]]; then
            # shellcheck disable=SC2086 # one id per word
            scancel $jobs 2>/dev/null
            for _ in $(seq 1 50); do
                [[ -z $(squeue -h -o %A 2>/dev/null) ]] && break
                sleep 0.2
            done
        fi
    fi
    stop_pid "$tmp/run/slurmd.pid" slurmd
    stop_pid "$tmp/run/slurmctld.pid" slurmctld
    stop_pid "$tmp/munge/munged.pid" munged
    if ((status != 0)) && [[ -d $tmp/log ]]; then
        for f in "$tmp"/log/*.log; do
            echo "---- last lines of $f" >&2
            tail -n 15 "$f" >&2
        done
    fi
    rm -rf "$tmp"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$tmp"/{etc,run,log,ctld,slurmd,munge}
chmod 700 "$tmp/munge"

# munged, with its key, socket, pid, seed and log in the temporary folder.
mungekey --create --keyfile="$tmp/munge/munge.key" >/dev/null 2>&1 ||
    dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chmod 600 "$tmp/munge/munge.key"
munged --force --key-file="$tmp/munge/munge.key" --socket="$tmp/munge/munge.socket" \
    --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/log/munged.log" \
    --seed-file="$tmp/munge/munged.seed" || { echo "slurm: munged did not start" >&2; exit 1; }

# Two free TCP ports on loopback.
free_port() {
    local port
    for _ in $(seq 1 200); do
        port=$((20000 + RANDOM % 40000))
        [[ $port == "${1:-}" ]] && continue
        if command -v ss >/dev/null 2>&1; then
            [[ -z $(ss -Htan "( sport = :$port )" 2>/dev/null) ]] || continue
        elif (: </dev/tcp/127.0.0.1/"$port") 2>/dev/null; then
            continue # something answers there
        fi
        echo "$port"
        return 0
    done
    return 1
}
ctld_port=$(free_port) || { echo "slurm: no free port" >&2; exit 1; }
slurmd_port=$(free_port "$ctld_port") || { echo "slurm: no free port" >&2; exit 1; }

cpus=$(nproc)
memory=$(($(awk '/^MemTotal:/ { print $2 }' /proc/meminfo) * 9 / 10240))

: >"$tmp/etc/plugstack.conf"
cat >"$SLURM_CONF" <<EOF
# A one-node cluster on loopback for Tests/slurm/run-slurm-test.sh.
ClusterName=winbacktest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/munge.socket
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$tmp/log/jobcomp.txt
# Finished jobs stay known to scontrol (there is no slurmdbd for sacct).
MinJobAge=3600
ReturnToService=2
InactiveLimit=0
KillWait=5
MailProg=/bin/true
PlugStackConfig=$tmp/etc/plugstack.conf
StateSaveLocation=$tmp/ctld
SlurmdSpoolDir=$tmp/slurmd
SlurmctldPidFile=$tmp/run/slurmctld.pid
SlurmdPidFile=$tmp/run/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

slurmctld -f "$SLURM_CONF" -i || { echo "slurm: slurmctld did not start" >&2; exit 1; }
slurmd -f "$SLURM_CONF" -N "$host" || { echo "slurm: slurmd did not start" >&2; exit 1; }

state=""
for _ in $(seq 1 120); do
    state=$(sinfo -h -N -n "$host" -o %t 2>/dev/null || true)
    [[ $state == idle ]] && break
    sleep 0.5
done
[[ $state == idle ]] || { echo "slurm: node $host is '${state:-unknown}', not idle, after 60 s" >&2; exit 1; }
echo "slurm: one-node cluster up ($host, $cpus CPUs, slurmctld port $ctld_port, slurmd port $slurmd_port)"

# ---- The checks ----------------------------------------------------------------------------

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
not_ok() { failed=$((failed + 1)); echo "FAILED: $*"; }

# The published folder of the one pipeline under an output directory: DIR/<name>/latest.
published() {
    local found=("$1"/*/latest)
    [[ ${#found[@]} == 1 && -d ${found[0]} ]] || return 1
    (cd -P "${found[0]}" && pwd)
}

# Every file of two published folders, manifest.json aside, byte for byte.
same_outputs() {
    local a=$1 b=$2 files_a files_b f
    files_a=$(cd "$a" && find . -type f ! -name manifest.json | LC_ALL=C sort)
    files_b=$(cd "$b" && find . -type f ! -name manifest.json | LC_ALL=C sort)
    if [[ $files_a != "$files_b" ]]; then
        echo "  the file lists differ:"
        diff <(echo "$files_a") <(echo "$files_b") | sed 's/^/    /' | head -n 20
        return 1
    fi
    [[ -n $files_a ]] || { echo "  no files in $a"; return 1; }
    while read -r f; do
        cmp "$a/$f" "$b/$f" || return 1
    done <<<"$files_a"
    echo "  $(wc -l <<<"$files_a") files identical"
}

# A listing of everything under an output directory, symlink targets included.
snapshot() { (cd "$1" 2>/dev/null && find . -printf '%p %y %l %s\n' | LC_ALL=C sort) || true; }

# Runs nightly.sh; its output in $tmp/nightly.out, its status in $nightly_status.
nightly_status=0
run_nightly() {
    local work=$1 pipeline=$2
    shift 2
    nightly_status=0
    "$nightly" "$pipeline" --work "$work" --shards 4 --tasks 3 --poll 1 --time 10:00 --partition debug "$@" \
        >"$tmp/nightly.out" 2>&1 || nightly_status=$?
    sed 's/^/  | /' "$tmp/nightly.out"
}

world="$tmp/world"
"$WINBACK" generate --customers 2000 --seed 3 --out "$world" >/dev/null
pipeline="$world/pipeline.yaml"
export WINBACK_STUB_TRACE="$tmp/trace"

echo "== a run split into 3 partition tasks, 4 shards and a merge"
start=$SECONDS
run_nightly "$tmp/work" "$pipeline"
if [[ $nightly_status == 0 ]]; then
    ok "nightly.sh exited 0 in $((SECONDS - start)) s"
else
    not_ok "nightly.sh exited $nightly_status"
fi
"$WINBACK" run "$pipeline" --output "$tmp/inmem" >/dev/null 2>"$tmp/inmem.err" || cat "$tmp/inmem.err"
if a=$(published "$world/out") && b=$(published "$tmp/inmem") && same_outputs "$a" "$b"; then
    ok "the published folder equals the in-memory run's, manifest.json aside"
else
    not_ok "the published folder differs from the in-memory run's (or is missing)"
fi
logs=$(find "$tmp/work/logs" -name '*.log' | wc -l)
if [[ $logs == 8 ]]; then
    ok "8 task logs under the work folder's logs/ (3 partition, 4 shard, 1 merge)"
else
    not_ok "expected 8 task logs under $tmp/work/logs, found $logs"
fi
if ((stub)); then
    expected=$'merge -\npartition 0\npartition 1\npartition 2\nrun 0\nrun 1\nrun 2\nrun 3'
    seen=$(grep -v '^run - ' "$WINBACK_STUB_TRACE" | cut -d' ' -f1,2 | LC_ALL=C sort)
    if [[ $seen == "$expected" ]]; then
        ok "each task ran once with its own SLURM_ARRAY_TASK_ID"
    else
        not_ok "tasks seen: $(tr '\n' ',' <<<"$seen")"
    fi
fi

echo "== a partition task fails"
before=$(snapshot "$world/out")
: >"$WINBACK_STUB_TRACE"
if ((stub)); then
    export WINBACK_STUB_FAIL=partition:1:65
    bad_pipeline=$pipeline
    expect_status=65
else
    # Root reads any file whatever its mode, so the failure is a corrupt gzip in a copy of
    # the world (the copy keeps the published run, which must stay as it is).
    cp -a "$world" "$tmp/bad-world"
    victim=$(find "$tmp/bad-world" -maxdepth 1 -name 'transactions-*.jsonl.gz' | LC_ALL=C sort | sed -n 5p)
    name=$(basename "$victim")
    head -c 4000 "$world/$name" >"$victim"
    printf 'not gzip at all' >>"$victim"
    bad_pipeline="$tmp/bad-world/pipeline.yaml"
    before=$(snapshot "$tmp/bad-world/out")
    expect_status=""
fi
run_nightly "$tmp/work-fail" "$bad_pipeline"
unset WINBACK_STUB_FAIL
if [[ $nightly_status != 0 ]] && [[ -z $expect_status || $nightly_status == "$expect_status" ]]; then
    ok "nightly.sh exited $nightly_status"
else
    not_ok "nightly.sh exited $nightly_status (expected ${expect_status:-non-zero})"
fi
if grep -Eq 'partition task [0-9]+_[0-9]+ ended FAILED' "$tmp/nightly.out"; then
    ok "the failed partition task is named"
else
    not_ok "no line names the failed partition task"
fi
if [[ $(snapshot "$(dirname "$bad_pipeline")/out") == "$before" ]]; then
    ok "nothing new was published"
else
    not_ok "the output folder changed"
fi
if [[ ! -e $tmp/work-fail/shards && ! -e $tmp/work-fail/_SUCCESS ]]; then
    ok "no shard task and no merge ran"
else
    not_ok "shard or merge outputs exist in $tmp/work-fail"
fi

if ((stub)); then
    echo "== the same work folder again, nothing failing: the retry completes"
    run_nightly "$tmp/work-fail" "$pipeline"
    if [[ $nightly_status == 0 ]] && a=$(published "$world/out") && b=$(published "$tmp/inmem") &&
        same_outputs "$a" "$b"; then
        ok "the retry published the same files"
    else
        not_ok "the retry exited $nightly_status or published other files"
    fi

    echo "== a shard task fails"
    before=$(snapshot "$world/out")
    export WINBACK_STUB_FAIL=run:2:70
    run_nightly "$tmp/work-shard" "$pipeline"
    unset WINBACK_STUB_FAIL
    if [[ $nightly_status == 70 ]] && grep -Eq 'shard task [0-9]+_2 ended FAILED with exit 70' "$tmp/nightly.out" &&
        [[ $(snapshot "$world/out") == "$before" ]]; then
        ok "exit 70, shard task 2 named, nothing published"
    else
        not_ok "a failed shard task: exit $nightly_status, see the output above"
    fi

    echo "== Slurm forgets finished jobs at once (MinJobAge) and has no accounting: the status files"
    mkdir -p "$tmp/forgetful"
    cat >"$tmp/forgetful/scontrol" <<EOF
#!/usr/bin/env bash
# scontrol as on a cluster that forgets a job the moment it ends.
if [[ \${1:-} == show && \${2:-} == job ]]; then
    out=\$("$(command -v scontrol)" "\$@") || exit
    if ! grep -Eq 'JobState=(PENDING|RUNNING|CONFIGURING|COMPLETING)' <<<"\$out"; then
        echo "slurm_load_jobs error: Invalid job id specified" >&2
        exit 1
    fi
    printf '%s\n' "\$out"
    exit 0
fi
exec "$(command -v scontrol)" "\$@"
EOF
    chmod +x "$tmp/forgetful/scontrol"
    PATH="$tmp/forgetful:$PATH" run_nightly "$tmp/work-forgetful" "$pipeline"
    if [[ $nightly_status == 0 ]]; then
        ok "a completed merge is learnt from its status file"
    else
        not_ok "nightly.sh exited $nightly_status with a forgetful slurmctld"
    fi
    export WINBACK_STUB_FAIL=partition:2:65
    PATH="$tmp/forgetful:$PATH" run_nightly "$tmp/work-forgetful-fail" "$pipeline"
    unset WINBACK_STUB_FAIL
    if [[ $nightly_status == 65 ]] && grep -Eq 'partition task [0-9]+_2 ended FAILED with exit 65' "$tmp/nightly.out"; then
        ok "a failed partition task is learnt from its status file (exit 65)"
    else
        not_ok "nightly.sh exited $nightly_status with a forgetful slurmctld, expected 65"
    fi

    echo "== the merge fails"
    before=$(snapshot "$world/out")
    export WINBACK_STUB_FAIL=merge:-:66
    run_nightly "$tmp/work-merge" "$pipeline"
    unset WINBACK_STUB_FAIL
    if [[ $nightly_status == 66 ]] && [[ $(snapshot "$world/out") == "$before" ]]; then
        ok "nightly.sh exited with the merge's status, 66"
    else
        not_ok "a failed merge: nightly.sh exited $nightly_status, expected 66"
    fi
fi

echo "slurm: $passed passed, $failed failed"
((failed == 0))
