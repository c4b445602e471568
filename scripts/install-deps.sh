#!/usr/bin/env bash
# Installs what wirevault's build, tests, demo and benchmarks need on Debian:
# libpcap (filter compiler), tcpdump/tshark/capinfos (peers the tests compare
# with), tcpreplay and netsniff-ng (traffic generators), fio (disk baseline),
# iproute2 (namespaces and veth pairs), ethtool (`tune`'s cross-check), ping (the demo's traffic),
# stenographer (benchmark peer), fonts-dejavu-core (disk-bench's plot text), nftables (packet
# loss in the analyze live test; this kernel has no netem) and python3 (test traffic, bench helpers).
#
# Idempotent and quiet when everything is present: `apt-get update` runs only
# when a package is missing. Needs root (or sudo) only in that case.
set -euo pipefail

packages=(libpcap-dev tcpdump tshark wireshark-common tcpreplay netsniff-ng fio iproute2 iputils-ping stenographer ethtool fonts-dejavu-core nftables python3 systemd curl prometheus nfdump)
# The web console's test: headless Chromium driven by Selenium (Debian's Python).
packages+=(chromium chromium-driver python3-selenium)
# Loop-mounted volumes (disk-bench and several-volume tests): losetup, mount, mkfs.ext4.
packages+=(mount e2fsprogs)
# The man pages rendered as man(1) shows them (tests/docs.rs).
packages+=(groff-base)
# The flow records' ClickHouse sink is tested against Debian's server (18.16); each test
# starts its own with a config of its own, so the packaged service is not needed running.
packages+=(clickhouse-server)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done

sudo=()
if ((${#missing[@]})); then
    echo "install-deps: installing ${missing[*]}" >&2
    if [[ $(id -u) -ne 0 ]]; then
        if command -v sudo >/dev/null; then
            sudo=(sudo)
        else
            echo "install-deps: missing ${missing[*]} and not root (no sudo); install them as root" >&2
            exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    # tshark asks whether non-root users may capture; answer no without a prompt.
    echo "wireshark-common wireshark-common/install-setuid boolean false" | "${sudo[@]}" debconf-set-selections 2>/dev/null || true
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    if ! { "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
        cat "$log" >&2
        echo "install-deps: apt-get failed" >&2
        exit 1
    fi
fi

# The flow records' tests read their Parquet files with pyarrow, from PyPI: Debian 12 has no
# python3-pyarrow. Debian's own Python refuses pip installs without --break-system-packages
# (PEP 668); a Python of one's own (pyenv, a venv) takes them as they are.
if ! python3 -c 'import pyarrow' 2>/dev/null; then
    echo "install-deps: installing pyarrow (pip)" >&2
    if ! python3 -m pip install -q pyarrow 2>/dev/null; then
        if ! python3 -m pip --version >/dev/null 2>&1; then
            "${sudo[@]}" apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
        fi
        python3 -m pip install -q --break-system-packages pyarrow
    fi
fi

if ! command -v cargo >/dev/null; then
    echo "install-deps: cargo not found; install a Rust toolchain (rustup or Debian's cargo) first" >&2
    exit 1
fi
