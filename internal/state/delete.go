package state

import "errors"

// ErrNotFinished is DeleteRun's refusal of a run that is not finished
// (pending, running, waiting or queued): only a finished run is deleted.
var ErrNotFinished = errors.New("run is not finished")
