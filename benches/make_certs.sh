#!/usr/bin/env bash
# benches/make_certs.sh DIR — a CA (DIR/ca.pem) and an ECDSA P-256
# certificate it signs for localhost and 127.0.0.1 (DIR/cert.pem, its key
# DIR/key.pem), valid two days: what the HTTPS benchmarks and smoke tests
# serve. Needs openssl.
set -euo pipefail
dir=${1:?usage: make_certs.sh DIR}
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${ec[@]}" -days 2 -subj "/CN=percore test CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
openssl req "${ec[@]}" -subj "/CN=localhost" -keyout "$dir/key.pem" -out "$dir/leaf.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$dir/leaf.ext"
openssl x509 -req -in "$dir/leaf.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
    -days 2 -extfile "$dir/leaf.ext" -out "$dir/cert.pem" 2>/dev/null
[[ -s $dir/cert.pem ]] || { echo "make_certs.sh: openssl could not make the certificate" >&2; exit 1; }
