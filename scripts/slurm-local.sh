#!/usr/bin/env bash
# A one-node Slurm 22.05 on localhost for drover's Slurm tests, without systemd (as root):
# munged, slurmctld and slurmd from Debian's packages, with tests/slurm/slurm.conf (8 CPU slots
# declared on any machine, 4 fake GPUs as character devices /dev/fakegpu0-3, partitions debug and
# high (high preempts debug by requeue), no accounting database: finished jobs in the jobcomp file).
#   scripts/slurm-local.sh install [--accounting]  # apt-get the packages (slurmctld slurmd
#                                    # slurm-client munge; with --accounting also slurmdbd and
#                                    # mariadb-server)
#   scripts/slurm-local.sh start [--accounting]    # (re)start it; ready when it returns (sinfo
#                                    # says idle). --accounting: with an accounting database
#                                    # (MariaDB and slurmdbd on localhost, sacct without -c)
#   scripts/slurm-local.sh stop      # stop the daemons by their pid files
#   scripts/slurm-local.sh status
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
conf="$here/../tests/slurm"

stop_one() {  # name pidfile
  local p
  [[ -s "$2" ]] || return 0
  p="$(cat "$2")"
  if kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p"
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then kill -KILL "$p"; fi
  fi
  rm -f "$2"
}

accounting=0
[[ "${2:-}" == --accounting ]] && accounting=1

# MariaDB and slurmdbd on localhost, without systemd; slurm.conf (installed) then stores jobs there.
start_accounting() {
  command -v slurmdbd >/dev/null && command -v mariadbd >/dev/null ||
    { echo "no slurmdbd or mariadbd: run $0 install --accounting first" >&2; exit 1; }
  install -d -o mysql -g mysql -m 0755 /run/mysqld
  [[ -d /var/lib/mysql/mysql ]] ||
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
  if ! mariadb-admin ping >/dev/null 2>&1; then
    (setsid /usr/sbin/mariadbd --user=mysql --datadir=/var/lib/mysql --bind-address=127.0.0.1 \
       --socket=/run/mysqld/mysqld.sock --pid-file=/run/mysqld/mysqld.pid \
       >/var/log/slurm/mariadb.log 2>&1 &)
    for _ in $(seq 100); do mariadb-admin ping >/dev/null 2>&1 && break; sleep 0.2; done
  fi
  mariadb -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'drover-test';
              GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
  cat > /etc/slurm/slurmdbd.conf <<CONF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=drover-test
StorageLoc=slurm_acct_db
PidFile=/run/slurm/slurmdbd.pid
LogFile=/var/log/slurm/slurmdbd.log
CONF
  chmod 0600 /etc/slurm/slurmdbd.conf
  stop_one slurmdbd /run/slurm/slurmdbd.pid
  /usr/sbin/slurmdbd
  for _ in $(seq 100); do sacctmgr -n show cluster >/dev/null 2>&1 && break; sleep 0.2; done
  sacctmgr -i -Q add cluster localci >/dev/null 2>&1 || true
  sed -i 's|^AccountingStorageType=.*|AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=localhost|' \
    /etc/slurm/slurm.conf
}

case "${1:-}" in
  install)
    [[ $(id -u) == 0 ]] || { echo "$0 install must run as root (apt-get)" >&2; exit 1; }
    extra=()
    ((accounting)) && extra=(slurmdbd mariadb-server)
    # The packages' scripts start their services and munge's makes its key as the munge user;
    # neither is wanted here (this script starts the daemons, as root): the key is made first,
    # and a policy-rc.d keeps invoke-rc.d from starting anything while they install.
    if [[ ! -s /etc/munge/munge.key ]]; then
      install -d -m 0700 /etc/munge
      dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
      chmod 0400 /etc/munge/munge.key
    fi
    policy=""
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
      policy=/usr/sbin/policy-rc.d
      printf '#!/bin/sh\nexit 101\n' > "$policy"
      chmod 0755 "$policy"
    fi
    status=0
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=600 \
      --no-install-recommends slurmctld slurmd slurm-client munge "${extra[@]}" || status=$?
    [[ -z "$policy" ]] || rm -f "$policy"
    exit "$status"
    ;;
  start)
    command -v slurmctld >/dev/null || { echo "no slurmctld: run $0 install first" >&2; exit 1; }
    # The node and the controller are "localhost": a minimal root may have no /etc/hosts.
    getent hosts localhost >/dev/null || echo "127.0.0.1 localhost" >> /etc/hosts
    [[ $(id -u) == 0 ]] || { echo "$0 start must run as root (it runs Slurm's daemons)" >&2; exit 1; }
    stop_one slurmd /run/slurm/slurmd.pid
    stop_one slurmctld /run/slurm/slurmctld.pid
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -m 0755 /run/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /etc/slurm
    install -m 0644 "$conf/slurm.conf" /etc/slurm/slurm.conf
    install -m 0644 "$conf/gres.conf" /etc/slurm/gres.conf
    for i in 0 1 2 3; do
      [[ -c /dev/fakegpu$i ]] || { rm -f /dev/fakegpu$i; mknod /dev/fakegpu$i c 195 $i; }
    done
    if [[ ! -s /etc/munge/munge.key ]]; then
      install -d -o munge -g munge -m 0700 /etc/munge
      dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
      chown munge:munge /etc/munge/munge.key
      chmod 0400 /etc/munge/munge.key
    fi
    if ! { [[ -s /run/munge/munged.pid ]] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; }; then
      # As the munge user; where this machine lets no other user run programs (some minimal
      # roots), as root with the key root's (munged --force).
      if ! runuser -u munge -- /usr/sbin/munged 2>/dev/null; then
        chown root:root /etc/munge /etc/munge/munge.key /var/lib/munge /var/log/munge /run/munge
        /usr/sbin/munged --force
      fi
    fi
    for _ in $(seq 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
    if ((accounting)); then start_accounting; else stop_one slurmdbd /run/slurm/slurmdbd.pid; fi
    /usr/sbin/slurmctld -c          # cold start: no job of an earlier test is left
    /usr/sbin/slurmd -N localhost   # the node's name in slurm.conf, whatever the hostname
    state=unknown
    for _ in $(seq 300); do
      state="$(sinfo -h -n localhost -o %T 2>/dev/null | head -1 || true)"
      case "$state" in idle|mixed|allocated) break ;; esac
      sleep 0.1
    done
    case "$state" in
      idle|mixed|allocated) echo "slurm ready (node localhost: $state)" ;;
      *) echo "slurm did not come up (node state: $state); see /var/log/slurm/" >&2; exit 1 ;;
    esac
    ;;
  stop)
    stop_one slurmd /run/slurm/slurmd.pid
    stop_one slurmctld /run/slurm/slurmctld.pid
    stop_one slurmdbd /run/slurm/slurmdbd.pid
    stop_one mariadbd /run/mysqld/mysqld.pid
    stop_one munged /run/munge/munged.pid
    ;;
  status)
    sinfo -o '%P %a %D %T %c %G' 2>&1
    ;;
  *)
    echo "usage: $0 install|start|stop|status" >&2
    exit 2
    ;;
esac
