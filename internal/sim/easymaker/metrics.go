package easymaker

import (
	"hash/fnv"
	"math"
	"strings"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
)

// hash01 maps the seed and parts to [0, 1) deterministically.
func hash01(seed uint64, parts ...string) float64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(seed >> (8 * i))
	}
	h.Write(b[:])
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return float64(h.Sum64()>>11) / float64(1<<53)
}

// quality scores hyperparameters in [0, 1] (1 best): each value is mapped
// to [0, 1) — numbers by their position in the spec's range when known,
// else by hash — and compared with a per-key optimum drawn from the seed.
func quality(seed uint64, hps []em.Hyperparameter, position func(key, value string) (float64, bool)) float64 {
	if len(hps) == 0 {
		return 0.6 + 0.3*hash01(seed, "no-hyperparameters")
	}
	sum := 0.0
	for _, h := range hps {
		x, ok := 0.0, false
		if position != nil {
			x, ok = position(h.HyperparameterKey, h.HyperparameterValue)
		}
		if !ok {
			x = hash01(seed, "value", h.HyperparameterKey, h.HyperparameterValue)
		}
		opt := hash01(seed, "optimum", h.HyperparameterKey)
		sum += 1 - math.Abs(x-opt)
	}
	return sum / float64(len(hps))
}

// lowerIsBetter tells the direction of a metric: the objective's type
// when it is the objective, else by name (loss, error, mse...).
func lowerIsBetter(name, objective, objType string) bool {
	if name == objective && objType != "" {
		return objType == em.ObjectiveMinimize
	}
	n := strings.ToLower(name)
	for _, w := range []string{"loss", "error", "mse", "mae", "rmse", "perplexity"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// metricValues are the final metrics of a training of quality q.
func metricValues(seed uint64, names []string, objective, objType string, q float64) []em.Metric {
	out := make([]em.Metric, 0, len(names))
	for _, n := range names {
		var v float64
		if lowerIsBetter(n, objective, objType) {
			v = 0.02 + (1-q)*(0.5+hash01(seed, "scale", n))
		} else {
			v = 0.5 + 0.49*q
		}
		out = append(out, em.Metric{MetricName: n, MetricValue: math.Round(v*1e4) / 1e4})
	}
	return out
}

func metricValue(ms []em.Metric, name string) (float64, bool) {
	for _, m := range ms {
		if m.MetricName == name {
			return m.MetricValue, true
		}
	}
	return 0, false
}
