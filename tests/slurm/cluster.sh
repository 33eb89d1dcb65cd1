#!/usr/bin/env bash
# A one-node SLURM cluster on loopback for the tests: munged, slurmctld and slurmd, run as root.
#
#   tests/slurm/cluster.sh start [DIR]   write DIR/slurm.conf, start the daemons, wait until the
#                                        node is idle; prints `export SLURM_CONF=DIR/slurm.conf`
#   tests/slurm/cluster.sh stop  [DIR]   stop the daemons by their pid files
#   tests/slurm/cluster.sh status [DIR]  sinfo of the cluster
#
# DIR defaults to $AUTOML_SLURM_DIR or /tmp/automl-slurm. Needs Debian's slurm-wlm and munge.
set -euo pipefail

action=${1:-}
dir=${2:-${AUTOML_SLURM_DIR:-/tmp/automl-slurm}}
conf="$dir/slurm.conf"
host=$(hostname -s)

fail() { echo "cluster.sh: $*" >&2; exit 1; }

write_conf() {
    mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
    cat >"$conf" <<CONF
ClusterName=automl-test
SlurmctldHost=${host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
AuthInfo=socket=$dir/munge/munge.socket.2
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
JobRequeue=1
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=600
KillWait=5
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
NodeName=${host} NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
}

stop_pid() {  # stop_pid NAME PIDFILE: TERM, wait up to 10 s, then KILL
    local name=$1 file=$2 pid
    [[ -s $file ]] || return 0
    pid=$(<"$file")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$pid" 2>/dev/null || true
        echo "stopped $name ($pid)"
    fi
    rm -f "$file"
}

start() {
    command -v slurmctld >/dev/null || fail "slurmctld not found: apt-get install slurm-wlm munge"
    [[ $(id -u) == 0 ]] || fail "the test cluster runs its daemons as root"
    stop
    write_conf
    munged --force --socket="$dir/munge/munge.socket.2" --pid-file="$dir/munged.pid" \
        --log-file="$dir/munged.log" --seed-file="$dir/munge/munge.seed" \
        || fail "munged did not start (see $dir/munged.log)"
    slurmctld -f "$conf" || fail "slurmctld did not start (see $dir/slurmctld.log)"
    slurmd -f "$conf" || fail "slurmd did not start (see $dir/slurmd.log)"
    for _ in $(seq 100); do
        state=$(SLURM_CONF=$conf sinfo --noheader --format=%T 2>/dev/null || true)
        if [[ $state == idle ]]; then
            echo "export SLURM_CONF=$conf"
            return 0
        fi
        sleep 0.3
    done
    fail "the node did not become idle (state: '${state:-none}'; logs in $dir)"
}

stop() {
    stop_pid slurmd "$dir/slurmd.pid"
    stop_pid slurmctld "$dir/slurmctld.pid"
    stop_pid munged "$dir/munged.pid"
}

case $action in
    start) start ;;
    stop) stop ;;
    status) SLURM_CONF=$conf sinfo ;;
    *) fail "usage: cluster.sh start|stop|status [DIR]" ;;
esac
