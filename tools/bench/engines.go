package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
)

// decodeCounter is the built-in engine's count of decoded tokens, from its
// Prometheus /metrics. Its growth on each engine over a segment shows how
// a party shared the work: a balancer that breaks its ties one way shows
// up here before anywhere else.
const decodeCounter = "mlc_engine_decode_tokens_total"

// decodedTokens reads every engine's decodeCounter.
func decodedTokens(ctx context.Context, engines []string) ([]float64, error) {
	out := make([]float64, len(engines))
	for i, e := range engines {
		body, err := getBody(ctx, "http://"+e+"/metrics")
		if err != nil {
			return nil, err
		}
		if out[i], err = counterValue(body, decodeCounter); err != nil {
			return nil, fmt.Errorf("%s/metrics: %w", e, err)
		}
	}
	return out, nil
}

// counterValue finds an unlabelled sample in a Prometheus text exposition.
func counterValue(body []byte, name string) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte(name+" "))
		if !ok {
			continue
		}
		return strconv.ParseFloat(string(bytes.TrimSpace(rest)), 64)
	}
	return 0, fmt.Errorf("no %s", name)
}

// getBody fetches url within adminTimeout.
func getBody(ctx context.Context, url string) ([]byte, error) {
	return get(ctx, url, adminTimeout, 8<<20)
}
