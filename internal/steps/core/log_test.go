package core_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/steps/stepstest"
)

func TestLog(t *testing.T) {
	d := desc(t, "log")
	tests := []struct {
		name string
		with map[string]any
		want string
	}{
		{"a message is logged at info by default", map[string]any{"message": "hello"}, "level=INFO msg=hello"},
		{"the level and fields are used", map[string]any{"message": "careful", "level": "warn", "fields": map[string]any{"b": 2, "a": "x"}},
			"level=WARN msg=careful a=x b=2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := stepstest.NewCall(t, d, tt.with)
			var buf bytes.Buffer
			c.Log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug,
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				}}))
			out, err := d.Run(context.Background(), c)
			require.NoError(t, err)
			assert.Equal(t, tt.with["message"], out["message"])
			assert.Equal(t, tt.want+"\n", buf.String())
		})
	}
	t.Run("an unknown level is rejected", func(t *testing.T) {
		_, _, problems := d.Decode(map[string]any{"message": "x", "level": "fatal"})
		require.Len(t, problems, 1)
		assert.Equal(t, `level: must be one of debug, info, warn, error (got "fatal")`, problems[0].Error())
	})
}
