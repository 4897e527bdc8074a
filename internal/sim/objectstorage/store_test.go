package objectstorage

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/runbook/runbook/internal/sim"
)

func TestStoreIsSharedPerEnv(t *testing.T) {
	env := &sim.Env{Clock: sim.NewClock(time.Time{}, 1)}
	s := For(env)
	assert.Same(t, s, For(env))
	assert.NotSame(t, s, For(&sim.Env{Clock: sim.NewClock(time.Time{}, 1)}))

	s.Put("AUTH_t", "models", "m/2/model.bin", []byte("two"), "")
	s.Put("t", "models", "m/1/model.bin", []byte("one"), "")
	s.Put("t", "models", "other", []byte("x"), "")
	got, ok := For(env).Get("t", "models", "m/1/model.bin")
	assert.True(t, ok)
	assert.Equal(t, []byte("one"), got)
	assert.Equal(t, []string{"m/1/model.bin", "m/2/model.bin"}, s.List("AUTH_t", "models", "m/"))
	_, ok = s.Get("t", "models", "missing")
	assert.False(t, ok)
	assert.Nil(t, s.List("t", "nope", ""))
}
