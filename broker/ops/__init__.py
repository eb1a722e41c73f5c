"""Operating a broker: the HTTP admin listener (metrics, health, fault injection), metrics, log formats."""
