#!/usr/bin/env bash
# A Flower deployment of examples/flower on 127.0.0.1, end to end:
#
# * TLS certificates generated on the spot (openssl: a CA, and a SuperLink
#   certificate for 127.0.0.1);
# * Flower's node authentication (Flower 1.42): the SuperLink runs with
#   --enable-supernode-auth, each SuperNode has an ECDSA key pair
#   (ssh-keygen -t ecdsa -b 384), registered with `flwr supernode register`,
#   and starts with --auth-supernode-private-key;
# * one SuperLink (TLS) and 3 SuperNodes (verifying it against the CA), each
#   node with a persistent X25519 key (cepam-key-file, mode 0600), signed by
#   its authentication key (cepam-auth-key-file: the same private key file),
#   and a context state file (cepam-state); the server checks each signature
#   against the key the SuperLink registered for the node (signed-keys) and
#   pins the keys by the authentication key's fingerprint (pinned-keys);
# * the app run to the end with key agreement; once round 2 has started, one
#   SuperNode is killed (SIGKILL, with its ClientApp process) and restarted
#   with the same keys and state;
# * checks: the run finished every round, the last round averaged all 3
#   updates (the restarted node's signed key authenticated again), no reply
#   was dropped for its key, and the pins file holds 3 keys for 3 nodes.
#
# Needs: flwr, cepam (flower and fl extras) and torch in the Python on PATH,
# openssl, ssh-keygen, and the MNIST folder in CEPAM_DATA.  Usage:
#   CEPAM_DATA=/path/to/mnist examples/flower/deploy_local.sh [rounds]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DATA=${CEPAM_DATA:?set CEPAM_DATA to the MNIST folder}
ROUNDS=${1:-5}
PORT=${CEPAM_DEPLOY_PORT:-18123}
WORK=$(mktemp -d)
export FLWR_HOME=$WORK/flwr
PIDS=()

descendants() {  # the process ids below $1, deepest first
    local child
    for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        descendants "$child"
        echo "$child"
    done
}
cleanup() {  # every process started here, and theirs (the SuperLink's ServerApp), by id
    local all=() pid
    for pid in "${PIDS[@]}"; do all+=($(descendants "$pid") "$pid"); done
    for pid in "${all[@]}"; do kill "$pid" 2>/dev/null || true; done
    sleep 2
    for pid in "${all[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
say() { echo "[deploy $(date +%H:%M:%S)] $*"; }

say "certificates in $WORK"
cd "$WORK"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj "/CN=cepam deploy test CA" -keyout ca.key -out ca.crt 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=127.0.0.1" -keyout server.key -out server.csr 2>/dev/null
printf "subjectAltName=IP:127.0.0.1,DNS:localhost\n" > san.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
    -extfile san.ext -out server.pem 2>/dev/null

for i in 0 1 2; do  # each SuperNode's authentication key pair (OpenSSH, P-384)
    ssh-keygen -q -t ecdsa -b 384 -N "" -C "cepam deploy node $i" -f "node$i.auth"
    say "node $i authentication key: $(ssh-keygen -lf "node$i.auth.pub" | cut -d' ' -f2)"
done

say "SuperLink on 127.0.0.1:$PORT (TLS, SuperNode authentication on)"
setsid flower-superlink --ssl-ca-certfile ca.crt --ssl-certfile server.pem \
    --ssl-keyfile server.key --enable-supernode-auth \
    --host 127.0.0.1 --port "$PORT" --database "$WORK/state.db" \
    --disable-runtime-dependency-installation > superlink.log 2>&1 &
PIDS+=($!)

mkdir -p "$FLWR_HOME"
cat > "$FLWR_HOME/config.toml" <<EOF
[superlink]
default = "deploy"

[superlink.deploy]
address = "127.0.0.1:$PORT"
root-certificates = "$WORK/ca.crt"
EOF

for _ in $(seq 120); do  # until the SuperLink answers over TLS
    flwr ls deploy > /dev/null 2>&1 && break
    sleep 1
done
for i in 0 1 2; do  # the SuperNodes' public keys registered with the SuperLink
    say "flwr supernode register node$i.auth.pub: $(flwr supernode register "node$i.auth.pub" \
        deploy 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' | grep -Ei "registered|error" | head -1)"
done

start_node() {  # partition
    local i=$1
    setsid flower-supernode --root-certificates ca.crt --superlink "127.0.0.1:$PORT" \
        --auth-supernode-private-key "$WORK/node$i.auth" \
        --port $((PORT + 10 + i)) --max-retries 100 \
        --node-config "partition-id=$i num-partitions=3 cepam-key-file='$WORK/node$i.key' cepam-auth-key-file='$WORK/node$i.auth' cepam-state='$WORK/node$i.state'" \
        >> "node$i.log" 2>&1 &
    NODE_PID[$i]=$!
    PIDS+=($!)
}
declare -a NODE_PID
for i in 0 1 2; do start_node "$i"; done
say "SuperNodes started (authenticated): pids ${NODE_PID[*]}"
say "flwr run: $ROUNDS rounds, 3 nodes, X25519 keys signed and pinned in $WORK/pins.json"
setsid flwr run "$ROOT/examples/flower" deploy --stream --run-config \
    "data-dir='$DATA' num-server-rounds=$ROUNDS min-nodes=3 num-clients=3 signed-keys=true pinned-keys='$WORK/pins.json'" \
    > run.log 2>&1 &
RUN=$!
echo "$RUN" > run.pid
PIDS+=($RUN)

# Kill one SuperNode once round 2 has started, then bring it back.
for _ in $(seq 600); do
    grep -q "\[ROUND 2/" run.log 2>/dev/null && break
    kill -0 "$RUN" 2>/dev/null || break
    sleep 1
done
say "round 2 started: killing SuperNode 1 (pid ${NODE_PID[1]} and its ClientApp, SIGKILL)"
kill -9 -- "-${NODE_PID[1]}"
wait "${NODE_PID[1]}" 2>/dev/null || true
# A SuperNode killed without deactivating stays online at the SuperLink for two
# heartbeat intervals (60 s by default): until then its restart is refused
# ("Failed to activate SuperNode", exit code 305), so it is retried.
for attempt in $(seq 20); do
    sleep 5
    before=$(grep -c "SuperNode ID:" node1.log || true)
    start_node 1
    while kill -0 "${NODE_PID[1]}" 2>/dev/null && \
            [ "$(grep -c "SuperNode ID:" node1.log || true)" = "$before" ]; do sleep 1; done
    kill -0 "${NODE_PID[1]}" 2>/dev/null && break
    say "restart $attempt of SuperNode 1 refused by the SuperLink (the killed one still counts as online): retrying"
done
say "SuperNode 1 restarted (pid ${NODE_PID[1]}), same authentication key, X25519 key and state: $(grep "SuperNode ID:" node1.log | tail -1 | sed -e 's/\x1b\[[0-9;]*m//g' -e 's/^INFO *: *//')"

wait "$RUN" || { say "flwr run failed"; tail -50 run.log; exit 1; }

grep -E "Aggregated MetricRecord|\[ROUND|dropped the reply|authenticated|cepam: [0-9]+ rounds released" run.log \
    | sed -e 's/\x1b\[[0-9;]*m//g' -e 's/^INFO *: *//' -e 's/^WARNING *: *//'
grep -h "Activated node_id" superlink.log | sed -e 's/\x1b\[[0-9;]*m//g' -e 's/^INFO *: *//' | sort | uniq -c
summary=$(grep -E "cepam: [0-9]+ rounds released" run.log | tail -1)
released=$(echo "$summary" | sed -E 's/.*cepam: ([0-9]+) rounds released.*/\1/')
pins=$(python -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$WORK/pins.json")
say "pinned keys: $pins (by authentication-key fingerprint: $(python -c \
    "import json,sys; print(', '.join(sorted(json.load(open(sys.argv[1])))))" "$WORK/pins.json"))"
if [ "$released" != "$ROUNDS" ]; then
    say "FAILED: $released of $ROUNDS rounds released"
    exit 1
fi
if [ "$pins" != "3" ]; then
    say "FAILED: $pins pinned keys for 3 nodes"
    exit 1
fi
if grep -qE "dropped the reply.*(signature|signed|public key changed|registered)" run.log; then
    say "FAILED: a reply was dropped for its key"
    exit 1
fi
last=$(grep -E "Aggregated MetricRecord: \{.*cepam-updates" run.log | tail -1 \
       | sed -E "s/.*'cepam-updates': ([0-9]+).*/\1/")
if [ "$last" != "3" ]; then
    say "FAILED: the last round averaged $last updates, not 3 (the restarted node is missing)"
    exit 1
fi
say "OK: $ROUNDS rounds over TLS with node authentication; every key signed by the node's registered key; the restarted SuperNode's key authenticated again"
