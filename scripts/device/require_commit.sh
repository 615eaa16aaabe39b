# Sourced by the device scripts whose runs record the code they ran (prednet_keras/runtime/code_provenance.py): the
# GPU machine's copy carries a .git whose HEAD can be older than its files, so the commit must come from the
# environment, whole. A short hash is not a commit the records can name: refuse before any device time is spent.
if ! [[ "${PREDNET_SOURCE_COMMIT:-}" =~ ^[0-9a-fA-F]{40}$ && "${PREDNET_SOURCE_DIRTY:-}" =~ ^[01]$ ]]; then
    echo "set PREDNET_SOURCE_COMMIT=\$(git rev-parse HEAD) (all 40 hex digits) and PREDNET_SOURCE_DIRTY=0 or 1;" \
         "found '${PREDNET_SOURCE_COMMIT:-}' and '${PREDNET_SOURCE_DIRTY:-}'" >&2
    exit 2
fi
