"""What a run's events say about its draft: where two racers first split and whether rounding explains it
(`divergence`), where acceptance falls by position and by kind of text (`falloff`), and a finished EAGLE run taken
apart for the Diagnose tab, with every shape replayed on its text (`run`)."""
