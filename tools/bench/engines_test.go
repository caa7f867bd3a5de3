package main

import (
	"slices"
	"testing"
)

func TestCounterValueFindsTheUnlabelledSample(t *testing.T) {
	body := []byte(`# HELP mlc_engine_decode_tokens_total Tokens decoded.
# TYPE mlc_engine_decode_tokens_total counter
mlc_engine_decode_tokens_total_extra 5
mlc_engine_kv_pages{state="used"} 3
mlc_engine_decode_tokens_total 1.234e+06
`)
	got, err := counterValue(body, decodeCounter)
	if err != nil || got != 1234000 {
		t.Errorf("counterValue = %v, %v; want 1234000", got, err)
	}
	if _, err := counterValue([]byte("other 1\n"), decodeCounter); err == nil {
		t.Error("a missing counter: no error")
	}
}

func TestDecodedSharesAddUpOverSegments(t *testing.T) {
	var tl tally
	tl.addDecoded([]float64{100, 50}, []float64{160, 90})  // 60 and 40
	tl.addDecoded([]float64{160, 90}, []float64{180, 170}) // 20 and 80
	f := tl.figures()
	if !slices.Equal(f.decodedShare, []float64{0.4, 0.6}) || shares(f.decodedShare) != "40/60" {
		t.Errorf("shares %v (%s), want 0.4 and 0.6", f.decodedShare, shares(f.decodedShare))
	}
}
