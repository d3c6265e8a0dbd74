"""Layer 3: typed transactions, manifest building, conflict rules and the commit
loop. No Spark."""
