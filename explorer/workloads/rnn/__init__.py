"""GNMT-style recurrent translation models: LSTM encoder-decoder with attention, pipelined."""
