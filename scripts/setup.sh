#!/usr/bin/env bash
# Installs what tallow's build and tests need. Idempotent: checks first and
# only installs what is missing. Where it cannot install (not root, no
# network) it prints the exact command to run and continues, so the build
# still proceeds with what is there and tests that need a missing package
# skip with a printed reason.
set -u
APT_PKGS="build-essential cmake pkg-config libpcre2-dev libutf8proc-dev libcjson-dev libmicrohttpd-dev python3 python3-pip unzip tmux clang libclang-rt-14-dev"
PIP_PKGS="numpy gguf tokenizers jinja2 openai"

missing_apt=""
for p in $APT_PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing_apt="$missing_apt $p"
done
if [ -n "$missing_apt" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "setup: apt-get install$missing_apt"
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing_apt) >/dev/null ||
            echo "setup: apt-get failed; run: sudo apt-get install -y$missing_apt"
    else
        echo "setup: please run: sudo apt-get install -y$missing_apt"
    fi
fi

missing_pip=""
for p in $PIP_PKGS; do
    python3 -c "import $p" >/dev/null 2>&1 || missing_pip="$missing_pip $p"
done
if [ -n "$missing_pip" ]; then
    echo "setup: pip install$missing_pip"
    python3 -m pip install -q --disable-pip-version-check $missing_pip >/dev/null 2>&1 ||
        echo "setup: pip failed; run: python3 -m pip install$missing_pip"
fi
exit 0
