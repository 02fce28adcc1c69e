#!/usr/bin/env bash
# Usage: check_exports.sh LIBRARY HEADER ABI_MAJOR NM READELF
# Every exported symbol is a moestream_* function declared in the header, and
# the SONAME is libmoestream.so.<ABI_MAJOR>.
set -euo pipefail
lib=$1 header=$2 major=$3 nm=${4:-nm} readelf=${5:-readelf}

status=0
# Defined dynamic symbols; "A" entries are symbol-version nodes (MOESTREAM_0).
exported=$("$nm" -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' | sed 's/@.*//' | sort -u)
[ -n "$exported" ] || { echo "no exported symbols found in $lib"; exit 1; }
declared=$(grep -oE '^MOESTREAM_API[^(;]*\bmoestream_[a-z0-9_]+[[:space:]]*\(' "$header" |
           grep -oE 'moestream_[a-z0-9_]+' | sort -u)
while read -r sym; do
  if [[ $sym != moestream_* ]]; then
    echo "exported symbol outside the API prefix: $sym"; status=1
  elif ! grep -qx "$sym" <<<"$declared"; then
    echo "exported but not declared in $(basename "$header"): $sym"; status=1
  fi
done <<<"$exported"

soname=$("$readelf" -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
if [ "$soname" != "libmoestream.so.$major" ]; then
  echo "SONAME is '$soname'; expected libmoestream.so.$major"; status=1
fi

n=$(wc -l <<<"$exported")
[ $status -eq 0 ] && echo "ok: $n exported moestream_* symbols, SONAME $soname"
exit $status
