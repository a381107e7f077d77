// Removed when ingest/ gets its sources.
typedef int ingest_placeholder_unused;
