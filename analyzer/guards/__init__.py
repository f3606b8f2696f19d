"""Loop-guard policies and their replay over history (the backtest)."""
