"""What a run's events say about its draft: where two racers first split and whether rounding explains it
(`divergence`), and where acceptance falls by position and by kind of text (`falloff`)."""
