package easymaker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
	obsuri "github.com/runbook/runbook/internal/cloud/objectstorage"
	"github.com/runbook/runbook/internal/sim"
	"github.com/runbook/runbook/internal/sim/objectstorage"
)

// ObjectStore is what batch inference needs of object storage. The
// object-storage simulator's *Store implements it.
type ObjectStore interface {
	Get(account, container, object string) ([]byte, bool)
	Put(account, container, object string, data []byte, contentType string)
	List(account, container, prefix string) []string
}

// defaultObjectStore is the object-storage simulator's store of the same
// server: objects a playbook uploads there are the batch input, and the
// output can be downloaded from there.
func defaultObjectStore(env *sim.Env) ObjectStore { return objectstorage.For(env) }

// parseOBS reads obs://{host}/v1/AUTH_{tenant}/{container}/{object} into
// the account (AUTH_{tenant}), container and object (may be empty or a
// prefix).
func parseOBS(uri string) (account, container, object string, err error) {
	_, account, container, object, err = obsuri.ParseURI(uri)
	return account, container, object, err
}

// FailBatchTrigger in a batch inference's name makes it end in
// FAIL_BATCH_INFERENCE.
const FailBatchTrigger = "fail-batch"

// Batch inference timing.
const (
	batchRunning  = time.Minute
	batchComplete = 3*time.Minute + 30*time.Second
)

type batch struct {
	v       em.BatchInference
	tl      timeline
	reason  string
	read    bool              // the input was read (at RUNNING)
	written bool              // the output was written (at COMPLETE_IN_PROGRESS)
	outputs map[string][]byte // object name -> content, waiting to be written
}

func (s *Service) batchView(b *batch) em.BatchInference {
	now := s.now()
	v := b.v
	v.BatchInferenceStatusCode, v.UpdatedDatetime = b.tl.state(now)
	if strings.Contains(v.BatchInferenceStatusCode, "FAIL") || strings.Contains(v.BatchInferenceStatusCode, "STOP") {
		v.StatusReason = b.reason
	}
	if v.BatchInferenceStatusCode != em.StatusComplete {
		v.OutputFileList, v.InferenceCount = nil, 0
	}
	return v
}

func (s *Service) createBatch(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeRequest[em.CreateBatchInferenceRequest](r)
	if err != nil {
		return err
	}
	if !s.flavor(req.FlavorID) {
		return errf(http.StatusBadRequest, codeInvalid, "invalid request: flavor_id: instance type %s does not exist", req.FlavorID)
	}
	m := s.all.models.find(req.ModelID)
	if m == nil {
		return errf(http.StatusBadRequest, codeInvalid, "invalid request: model_id: model %s does not exist", req.ModelID)
	}
	if st := m.tl.at(s.now()); st != em.StatusActive {
		return errf(http.StatusBadRequest, codeInvalid, "model %s is %s, not ACTIVE", req.ModelID, st)
	}
	for _, u := range []struct{ field, uri string }{{"input_data_uri", req.InputDataURI}, {"output_upload_uri", req.OutputUploadURI}} {
		if strings.HasPrefix(u.uri, "nas://") {
			continue
		}
		if _, _, _, err := parseOBS(u.uri); err != nil {
			return errf(http.StatusBadRequest, codeInvalid, "invalid request: %s: %v", u.field, err)
		}
	}
	for _, b := range s.batches {
		if b.v.BatchInferenceName == req.BatchInferenceName {
			return errf(http.StatusConflict, codeConflict, "a batch inference named %q already exists (%s)", req.BatchInferenceName, b.v.BatchInferenceID)
		}
	}
	if req.TimeoutHours == 0 {
		req.TimeoutHours = em.MaxTimeoutHours
	}
	now := s.now()
	b := &batch{v: em.BatchInference{
		BatchInferenceID: s.newID(), BatchInferenceName: req.BatchInferenceName, BatchInferenceDescription: req.BatchInferenceDescription,
		FlavorID: req.FlavorID, ModelID: req.ModelID, InstanceCount: req.InstanceCount, TimeoutHours: req.TimeoutHours,
		PodCount: req.PodCount, BatchSize: req.BatchSize, InferenceTimeoutSeconds: req.InferenceTimeoutSeconds,
		InputDataURI: req.InputDataURI, InputDataType: req.InputDataType, IncludeGlobPattern: req.IncludeGlobPattern,
		ExcludeGlobPattern: req.ExcludeGlobPattern, OutputUploadURI: req.OutputUploadURI, DataStorageSize: req.DataStorageSize,
		TagList: req.TagList, UseLog: req.UseLog, CreatedDatetime: now,
	}}
	b.tl = schedule(now, time.Duration(0), em.StatusCreateRequested, 10*time.Second, em.StatusCreateInProgress,
		batchRunning, em.StatusRunning, batchComplete-30*time.Second, em.StatusCompleteInProgress, batchComplete, em.StatusComplete)
	if strings.Contains(strings.ToLower(req.BatchInferenceName), FailBatchTrigger) {
		b.fail(fmt.Sprintf("inference process exited with code 1 (simulated: the name contains %q)", FailBatchTrigger))
	}
	s.batches = append(s.batches, b)
	writeOK(w, http.StatusCreated, "batchInference", s.batchView(b))
	return nil
}

// fail rewrites the timeline after RUNNING: FAIL_BATCH_INFERENCE_IN_PROGRESS
// a minute later, FAIL_BATCH_INFERENCE 30 s after that.
func (b *batch) fail(reason string) {
	run := b.v.CreatedDatetime.Add(batchRunning)
	b.reason, b.read, b.written, b.outputs = reason, true, true, nil
	b.tl = b.tl.cut(run, phase{run.Add(time.Minute), em.StatusFailBatchInferenceIP},
		phase{run.Add(time.Minute + stopDuration), em.StatusFailBatchInference})
}

// tick applies what the clock has reached: a batch inference reads its
// input when it reaches RUNNING (failing when there is none or it is
// malformed) and writes its output when it reaches COMPLETE_IN_PROGRESS.
func (s *Service) tick() {
	now := s.now()
	for _, b := range s.batches {
		if !b.read && !now.Before(b.v.CreatedDatetime.Add(batchRunning)) {
			b.read = true
			if err := s.runBatch(b); err != nil {
				b.fail(err.Error())
				continue
			}
		}
		if st := b.tl.at(now); b.read && !b.written && (st == em.StatusCompleteInProgress || st == em.StatusComplete) {
			b.written = true
			acct, cont, prefix, _ := parseOBS(b.v.OutputUploadURI)
			for name, data := range b.outputs {
				s.objects.Put(acct, cont, joinObject(prefix, name), data, "application/json")
			}
			b.outputs = nil
		}
	}
}

func joinObject(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return strings.TrimRight(prefix, "/") + "/" + name
}

// runBatch reads the input files and computes the outputs: one output
// object {name}.out per input file, under output_upload_uri. A JSON file
// holds {"instances": [[numbers]]} and gets {"predictions": [...]}; each
// line of a JSONL file holds one instance ([numbers], or
// {"instances": [...]}) and gets a line {"predictions": [...]}.
func (s *Service) runBatch(b *batch) error {
	if strings.HasPrefix(b.v.InputDataURI, "nas://") || strings.HasPrefix(b.v.OutputUploadURI, "nas://") {
		return fmt.Errorf("the simulator reads and writes batch data only in object storage (obs://), not NAS")
	}
	acct, cont, prefix, err := parseOBS(b.v.InputDataURI)
	if err != nil {
		return err
	}
	var files []string
	if _, ok := s.objects.Get(acct, cont, prefix); ok && prefix != "" {
		files = []string{prefix}
	} else {
		dir := prefix
		if dir != "" && !strings.HasSuffix(dir, "/") {
			dir += "/"
		}
		files = s.objects.List(acct, cont, dir)
	}
	base := strings.TrimRight(prefix, "/")
	b.outputs = map[string][]byte{}
	count := 0
	var names []string
	for _, f := range files {
		rel := strings.TrimPrefix(strings.TrimPrefix(f, base), "/")
		if rel == "" {
			rel = path.Base(f)
		}
		if !globOK(b.v.IncludeGlobPattern, rel, true) || globOK(b.v.ExcludeGlobPattern, rel, false) {
			continue
		}
		data, _ := s.objects.Get(acct, cont, f)
		out, n, err := inferFile(s.env.Seed, b.v.ModelID, b.v.InputDataType, data)
		if err != nil {
			return fmt.Errorf("input file %s: %v", f, err)
		}
		count += n
		b.outputs[rel+".out"] = out
		names = append(names, joinObject(strings.TrimRight(b.v.OutputUploadURI, "/"), rel+".out"))
	}
	if len(b.outputs) == 0 {
		return fmt.Errorf("no input files under %s", b.v.InputDataURI)
	}
	sort.Strings(names)
	b.v.InputFileCount, b.v.InferenceCount, b.v.OutputFileList = len(b.outputs), count, names
	return nil
}

// globOK matches pattern against the relative name and its base name; an
// empty pattern answers empty.
func globOK(pattern, rel string, empty bool) bool {
	if pattern == "" {
		return empty
	}
	if ok, _ := path.Match(pattern, rel); ok {
		return true
	}
	ok, _ := path.Match(pattern, path.Base(rel))
	return ok
}

func inferFile(seed uint64, modelID, typ string, data []byte) ([]byte, int, error) {
	if typ == em.InputDataTypeJSON {
		inst, err := parseInstances(data)
		if err != nil {
			return nil, 0, err
		}
		out, _ := json.Marshal(map[string]any{"predictions": predictAll(seed, modelID, inst)})
		return append(out, '\n'), len(inst), nil
	}
	var buf bytes.Buffer
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for line := 1; sc.Scan(); line++ {
		l := bytes.TrimSpace(sc.Bytes())
		if len(l) == 0 {
			continue
		}
		var inst [][]float64
		var x []float64
		if err := json.Unmarshal(l, &x); err == nil {
			inst = [][]float64{x}
		} else if inst, err = parseInstances(l); err != nil {
			return nil, 0, fmt.Errorf("line %d: want [numbers] or {\"instances\": [[numbers]]}", line)
		}
		out, _ := json.Marshal(map[string]any{"predictions": predictAll(seed, modelID, inst)})
		buf.Write(out)
		buf.WriteByte('\n')
		n += len(inst)
	}
	if err := sc.Err(); err != nil {
		return nil, 0, err
	}
	return buf.Bytes(), n, nil
}

func (s *Service) stopBatch(w http.ResponseWriter, r *http.Request, id string) error {
	b, err := s.all.batches.lookup(id)
	if err != nil {
		return err
	}
	if b.tl, err = s.all.batches.stopped(id, b.tl, s.now()); err != nil {
		return err
	}
	b.reason, b.read, b.written, b.outputs = "stopped by request", true, true, nil
	s.all.batches.answer(w, http.StatusOK, b)
	return nil
}

func (s *Service) deleteBatch(w http.ResponseWriter, r *http.Request, id string) error {
	b, err := s.all.batches.lookup(id)
	if err != nil {
		return err
	}
	if err := s.all.batches.deletable(id, b.tl, s.now()); err != nil {
		return err
	}
	s.all.batches.remove(b)
	writeOK(w, http.StatusOK, "", nil)
	return nil
}
