"""The task graph of one training iteration: what each GPU class computes and sends, as typed
records the engine schedules and the analysis reads (never re-prices)."""
