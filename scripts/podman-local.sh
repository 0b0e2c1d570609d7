#!/usr/bin/env bash
# Podman on this machine for drover's container tests (docs/containers.md), as root:
#   scripts/podman-local.sh install   # apt-get podman, runc, catatonit, busybox-static, debootstrap;
#                                     # containers.conf where this host needs one; 4 fake GPUs
#                                     # (/dev/fakegpu0-3) named in a CDI spec
#   scripts/podman-local.sh images    # build the test images, unless they are there:
#                                     #   localhost/drover-bb:test     busybox, 2 MB (fast tests)
#                                     #   localhost/drover-digits:test Debian 12 minbase with
#                                     #   python3, python3-torch, python3-sklearn (the digits)
#   scripts/podman-local.sh status
# No registry is used: both images are made from files here and `podman import`ed.
set -euo pipefail

bb_image=localhost/drover-bb:test
digits_image=localhost/drover-digits:test

install_podman() {
  [[ $(id -u) == 0 ]] || { echo "$0 install must run as root (apt-get)" >&2; exit 1; }
  local missing=()
  for p in podman runc catatonit busybox-static debootstrap; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
      --no-install-recommends "${missing[@]}" >/dev/null
  fi
  # Podman asks for nofile=1048576 by default, which a process without CAP_SYS_RESOURCE cannot
  # raise to; crun refuses hybrid cgroups (v1 controllers beside a v2 mount), runc takes them.
  if [[ ! -e /etc/containers/containers.conf ]]; then
    install -d /etc/containers
    local runtime=""
    [[ -d /sys/fs/cgroup/unified && -d /sys/fs/cgroup/memory ]] && runtime=$'[engine]\nruntime = "runc"'
    cat > /etc/containers/containers.conf <<CONF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=32768:32768"]
$runtime
CONF
  fi
  # Fake GPUs: character devices, named in a CDI spec as drover's fake GPUs are (GPU-fake-N).
  local cdi=$'cdiVersion: "0.5.0"\nkind: nvidia.com/gpu\ndevices:'
  local all=""
  for i in 0 1 2 3; do
    [[ -e /dev/fakegpu$i ]] || mknod /dev/fakegpu$i c 195 $i
    cdi+=$'\n'"- name: GPU-fake-$i"$'\n  containerEdits:\n    deviceNodes:\n    - path: '"/dev/fakegpu$i"
    all+=$'\n'"    - path: /dev/fakegpu$i"
  done
  cdi+=$'\n- name: all\n  containerEdits:\n    deviceNodes:'"$all"
  install -d /etc/cdi
  printf '%s\n' "$cdi" > /etc/cdi/drover-fake-gpus.yaml
}

build_images() {
  local tmp
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' RETURN
  if ! podman image exists "$bb_image"; then
    mkdir -p "$tmp/bb/bin" "$tmp/bb/tmp"
    cp /bin/busybox "$tmp/bb/bin/"
    for a in sh ls cat id ps ip sleep true false echo env nc wget touch mkdir rm date head tail \
             grep sed kill hostname pwd; do
      ln -s busybox "$tmp/bb/bin/$a"
    done
    chmod 1777 "$tmp/bb/tmp"
    tar -C "$tmp/bb" -cf "$tmp/bb.tar" .
    podman import -q "$tmp/bb.tar" "$bb_image" >/dev/null
    echo "built $bb_image"
  fi
  if ! podman image exists "$digits_image"; then
    local mirror
    mirror="$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)"
    [[ -n "$mirror" ]] || mirror=http://deb.debian.org/debian
    debootstrap --variant=minbase bookworm "$tmp/root" "$mirror" >/dev/null
    chroot "$tmp/root" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
      python3 python3-torch python3-sklearn python3-numpy >/dev/null
    chroot "$tmp/root" apt-get clean
    rm -rf "$tmp/root/var/lib/apt/lists/"*
    tar -C "$tmp/root" -c . | podman import -q - "$digits_image" >/dev/null
    echo "built $digits_image"
  fi
}

case "${1:-}" in
  install) install_podman ;;
  images) build_images ;;
  status) podman --version && podman images --filter reference='localhost/drover-*' ;;
  *) echo "usage: $0 install|images|status" >&2; exit 2 ;;
esac
