"""The shared vocabulary: incidents, prices, time windows, formatting of figures."""
