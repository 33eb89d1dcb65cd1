"""The texts of every operation's result, by area: both faces show exactly these."""
