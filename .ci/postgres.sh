#!/usr/bin/env bash
# Start a PostgreSQL server on this machine for the test of several tuning workers sharing one
# optuna study (tests/test_tune.py), with a fresh database; prints the SQLAlchemy URL to use.
# Installs Debian's postgresql when it is missing (CI runs as root).
set -euo pipefail
if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
ver=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h | awk '{print $1" "$2}' | grep -qx "$ver main"; then
  pg_createcluster "$ver" main >/dev/null
fi
pg_ctlcluster "$ver" main start >/dev/null 2>&1 || true
for _ in $(seq 1 30); do
  su postgres -c "psql -qtAc 'SELECT 1'" >/dev/null 2>&1 && break
  sleep 1
done
su postgres -c "psql -qtAc \"SELECT 1 FROM pg_roles WHERE rolname='tilec'\"" | grep -q 1 \
  || su postgres -c "psql -qc \"CREATE USER tilec WITH PASSWORD 'tilec'\""
su postgres -c "dropdb --if-exists tilec_ci && createdb -O tilec tilec_ci"
echo "postgresql+psycopg2://tilec:tilec@127.0.0.1:5432/tilec_ci"
