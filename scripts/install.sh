#!/usr/bin/env bash
# Installs the release build of wirevault with its man pages and shell
# completions (generated from the clap definitions by the hidden
# `wirevault generate-docs DIR`):
#   $PREFIX/bin/wirevault
#   $PREFIX/share/man/man1/wirevault.1, wirevault-{record,query,index,repair}.1
#   $PREFIX/share/bash-completion/completions/wirevault
#   $PREFIX/share/zsh/site-functions/_wirevault
#   $PREFIX/share/fish/vendor_completions.d/wirevault.fish
# PREFIX defaults to /usr/local; DESTDIR is honoured (packaging). Builds the
# release binary first (a no-op when it is current). Needs write access to PREFIX.
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=${PREFIX:-/usr/local}
dest=${DESTDIR:-}
bin=target/release/wirevault
cargo build --release -q -p wirevault
gen=$(mktemp -d)
trap 'rm -rf "$gen"' EXIT
"$bin" generate-docs "$gen"

install -D -m 0755 "$bin" "$dest$prefix/bin/wirevault"
for page in "$gen"/man/*.1; do
    install -D -m 0644 "$page" "$dest$prefix/share/man/man1/$(basename "$page")"
done
install -D -m 0644 "$gen/completions/wirevault.bash" "$dest$prefix/share/bash-completion/completions/wirevault"
install -D -m 0644 "$gen/completions/_wirevault" "$dest$prefix/share/zsh/site-functions/_wirevault"
install -D -m 0644 "$gen/completions/wirevault.fish" "$dest$prefix/share/fish/vendor_completions.d/wirevault.fish"
if [[ -z $dest ]] && command -v mandb >/dev/null; then
    mandb -q "$prefix/share/man" 2>/dev/null || true
fi
echo "install: wirevault, its man pages and bash/zsh/fish completions are in $dest$prefix" >&2
