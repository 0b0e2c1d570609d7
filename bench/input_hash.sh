#!/bin/sh
# Input hashing: how long drover takes to decide that a pipeline's 2 GB, 20,000-file input folder
# is unchanged at a second submit, against the first (hashing) pass and against sha256sum over the
# same files (bench/README.md, "Input hashing"). On the machine's real disk by default.
#   bench/input_hash.sh [DIR_ON_DISK]      (default: a folder under /var/tmp)
# Needs: cmake --build build --target input_hash_bench
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
bin="$here/build/input_hash_bench"
[ -x "$bin" ] || { echo "build it first: cmake --build build --target input_hash_bench" >&2; exit 2; }
root=${1:-/var/tmp/drover-input-hash}
data="$root/data"
files=${FILES:-20000}
kib=${KIB_PER_FILE:-105}   # 20,000 x 105 KiB = about 2 GB
if [ ! -f "$root/.complete-$files-$kib" ]; then
  rm -rf "$data"
  mkdir -p "$data"
  echo "writing $files files of $kib KiB under $data ..." >&2
  i=0
  while [ $i -lt $files ]; do
    d="$data/part$((i / 1000))"
    [ -d "$d" ] || mkdir -p "$d"
    head -c $((kib * 1024)) /dev/urandom > "$d/f$i.bin"
    i=$((i + 1))
  done
  sync
  touch "$root/.complete-$files-$kib"
  sleep 2   # files changed within the last second are never cached
fi
# Cold: the first pass reads from the disk, as a first submit after a reboot would (root only).
if [ -w /proc/sys/vm/drop_caches ]; then sync; echo 3 > /proc/sys/vm/drop_caches; cold=true; else cold=false; fi
echo "== drover: first submit (hash all; page cache dropped: $cold), second submit (unchanged)" >&2
"$bin" "$data" "$root/cache"
echo "== sha256sum over the same files (page cache warm from the passes above)" >&2
start=$(date +%s%N)
find "$data" -type f -name '*.bin' -print0 | xargs -0 sha256sum > /dev/null
end=$(date +%s%N)
echo "{\"sha256sum_s\": $(( (end - start) / 1000000000 )).$(printf '%03d' $(( (end - start) / 1000000 % 1000 )))}"
