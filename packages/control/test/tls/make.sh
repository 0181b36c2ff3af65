#!/usr/bin/env bash
# Regenerates the test-only CA and the certificates packages/control/test/tls.test.ts uses
# (valid 100 years; never deploy them). Run from this folder.
set -euo pipefail
days=36500
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days $days \
  -subj /CN=taskline-test-ca -keyout ca.key -out ca.pem 2>/dev/null
cert() { # name, subject, extensions
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$2" \
    -keyout "$1.key" -out "$1.csr" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days $days \
    -extfile <(printf '%s\n' "$3") -out "$1.pem" 2>/dev/null
  rm "$1.csr"
}
cert scheduler taskline-scheduler 'subjectAltName=DNS:taskline-scheduler,IP:127.0.0.1'
cert worker taskline-worker 'extendedKeyUsage=clientAuth'
# A certificate from another CA: what a pod that is not a worker could present.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days $days \
  -subj /CN=intruder -keyout intruder.key -out intruder.pem 2>/dev/null
rm -f ca.srl ca.key
