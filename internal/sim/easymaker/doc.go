// Package easymaker simulates the AI EasyMaker API that the
// machine-learning SDK of spec/webhook-and-ml-sdk.md calls, with the
// paths, auth and envelope of spec/FIDELITY.md, for rehearsals and tests.
// It registers as the simulator service "easymaker".
//
// # Paths and auth
//
// Under /v1.0/appkeys/{appkey}: GET /flavors, /images, /algorithms (a
// fixed catalog, see catalog.go); GET|POST /experiments, GET|DELETE
// /experiments/{id}; the same plus PUT /{id}/stop for /trainings,
// /hyperparameter-tunings and /batch-inferences; /models, /endpoints,
// /endpoint-stages (list with ?endpointId=, required) and GET
// /endpoint-models (list with ?endpointStageId=, required; GET by ID).
// Lists take ?page= (1-based) and ?limit= (default 50, at most 1000) and
// answer paging {page, limit, totalCount}; trainings and tunings filter
// on ?experimentId=, and a tuning's trials are listed only with
// ?hyperparameterTuningId=.
//
// Every API call needs X-Secret-Key equal to the simulator's secret key,
// or x-nhn-authorization: Bearer <token> with a token from POST
// /oauth2/token/create on the same base (Basic auth with the access key
// pair, form grant_type=client_credentials; answers access_token,
// token_type Bearer, expires_in 86400; tokens expire on the simulated
// clock; ExpireTokens drops them all). Connection hands out appkey,
// secret_key, access_key_id, access_key_secret, token_url and base_url.
// A wrong appkey in the path answers 403.
//
// # Envelope and errors
//
// Success: {"header":{"isSuccessful":true,"resultCode":0,"resultMessage":
// "SUCCESS"}, "<resource>": {...}} or "<resource>List": [...] with
// paging. Creates answer 201, the rest 200. Failures carry the header
// with isSuccessful false and these result codes (the real codes are not
// public; these are the simulator's):
//
//	40000 400  validation (the message names every field: "training_name: must be at most 50 characters (got 51)"), unknown IDs in a body, wrong state for the call
//	40100 401  no or bad credentials; 403 for another appkey
//	40400 404  unknown resource or path
//	40900 409  duplicate name; delete refused because something depends on it
//	40901 400  operation refused while the resource is in progress (stop a finished run, delete a running one)
//
// The limits checked are the spec's, through the Problems methods of
// internal/cloud/easymaker (shared with the client and the steps). An
// answer names each field as the request body does, then as the SDK does
// ("trainingName / training_name: is required", easymaker.BodyPath). Names
// 50, descriptions 255, URIs 255, IDs 36, tag_list 10, dataset_list 10,
// hyperparameter lists 100, timeout_hours 1..720, data_storage_size
// 300..10000, distributed_node_count 1..10, distributed_node_count x
// parallel_trial_count <= 10, endpoint_instance_count 1..10, podCount and
// pod_count 1..100, instance_count 1..10, batch_size 1..1000,
// inference_timeout_seconds 1..1200, input_data_type JSON|JSONL. Stage
// names are checked against 50 characters only (the SDK's comment about
// 30 lowercase characters is not enforced).
//
// Journal and fault injection come from the sim framework (every call is
// journaled; injected 429/5xx and latency apply to these paths).
//
// # Lifecycles (simulated clock)
//
// Statuses are computed from the clock on every request (no goroutines):
// sim.Clock.Advance makes them happen at once.
//
//   - experiment: CREATE_REQUESTED, CREATE_IN_PROGRESS (+5 s), ACTIVE
//     (+20 s). Creating a name that exists answers the existing experiment
//     (200, as the SDK reports). Trainings and tunings need an ACTIVE
//     experiment (400 otherwise). DELETE of an experiment that still holds
//     trainings or tunings is refused with 409: a documented choice
//     matching the console, which asks to delete them first.
//   - training: CREATE_REQUESTED, CREATE_IN_PROGRESS (+10 s), RUNNING
//     (+1 m), COMPLETE_IN_PROGRESS (+4 m), COMPLETE (+5 m); metricList
//     (the algorithm's metrics, else loss and accuracy) appears at
//     COMPLETE, deterministic from the seed and the hyperparameters.
//     Duplicate names in an experiment answer 409.
//   - hyperparameter tuning: CREATE_REQUESTED, CREATE_IN_PROGRESS,
//     RUNNING (+1 m); then trials run parallel_trial_count at a time, up
//     to max_trial_count (default 6; GRID: the grid's size when smaller),
//     3 simulated minutes each. Hyperparameters are drawn from the spec
//     list with a generator seeded by the simulator's seed and
//     tuning_strategy_random_state (else the tuning's name); GRID walks
//     the grid in order; BAYESIAN_OPTIMIZATION and RANDOM both sample at
//     random. A trial's metrics are a function of the seed and its
//     hyperparameters. MEDIAN early stopping: at
//     early_stopping_start_step of 10 steps, a trial whose objective is
//     worse than the median of at least early_stopping_min_trial_count
//     finished trials stops (trialStatusCode EARLY_STOPPED). Scheduling
//     stops once a finished trial reached objective_goal. Then
//     COMPLETE_IN_PROGRESS and COMPLETE (+30 s) with bestTrainingId,
//     bestMetricList, bestHyperparameterList and bestObjectiveMetricValue
//     by objective_metric_name / objective_type_code (defaults: the first
//     metric, MINIMIZE for loss-like names else MAXIMIZE). Trials are
//     trainings readable with GET /trainings/{id}; trialList on the tuning
//     shows those started so far.
//   - model: CREATE_REQUESTED, CREATE_IN_PROGRESS (+5 s), ACTIVE (+30 s);
//     from a COMPLETE training, a COMPLETE tuning's best training, or a
//     URI with frameworkCode TENSORFLOW|PYTORCH. Duplicate names 409;
//     delete refused (409) while a stage serves it.
//   - endpoint: CREATE_REQUESTED, CREATE_IN_PROGRESS (+10 s), ACTIVE
//     (+2 m), created with a default stage named "default" that goes
//     CREATE_REQUESTED, DEPLOY_IN_PROGRESS (+10 s), ACTIVE (+2 m 30 s);
//     endpointModelStatusCode follows its stage. Models must be ACTIVE.
//     POST /endpoint-stages adds a stage to an ACTIVE endpoint (same
//     timing). The default stage cannot be deleted alone (400); DELETE of
//     an endpoint removes it with its stages at once.
//   - batch inference: CREATE_REQUESTED, CREATE_IN_PROGRESS (+10 s),
//     RUNNING (+1 m, the input is read), COMPLETE_IN_PROGRESS (+3 m, the
//     output is written), COMPLETE (+3 m 30 s).
//
// PUT .../stop on a training, tuning or batch inference that has not
// finished: STOP_IN_PROGRESS now, STOPPED 30 s later (a tuning stops its
// running trials and drops those not started); on a finished one 400.
// DELETE of a training, tuning or batch inference that has not finished
// is refused (400); deletes take effect at once (a later GET is 404).
//
// # Failure triggers
//
//   - a training whose name contains "fail-train", or with hyperparameter
//     sim_fail=true: RUNNING, FAIL_TRAIN_IN_PROGRESS (+2 m), FAIL_TRAIN
//     (+2 m 30 s), statusReason saying why.
//   - a tuning whose name contains "fail-tune": every trial fails; the
//     tuning ends FAIL_HYPERPARAMETER_TUNING when failures reach
//     max_failed_trial_count, or when no trial completed.
//   - a batch inference whose name contains "fail-batch", or whose input
//     is missing or malformed: FAIL_BATCH_INFERENCE_IN_PROGRESS,
//     FAIL_BATCH_INFERENCE, statusReason naming the file and line.
//
// # Predict
//
// Each stage's apigwStageUrl is {base}/_stage/{stageId}, served by this
// simulator without authentication. POST {apigwStageUrl}{apigwResourceUri}
// with {"instances": [[numbers], ...]} answers {"predictions": [...]},
// one number per instance from a fixed linear function per model
// (Predict); 404 {"error"} for an unknown stage or resource URI, 400 for a
// malformed body, 503 while the stage is not ACTIVE.
//
// # Batch data
//
// input_data_uri and output_upload_uri are obs://{host}/v1/AUTH_{tenant}/
// {container}/{path}. The input is the object at that path or every
// object under it, filtered by include/exclude_glob_pattern (matched on
// the relative path and the base name). JSON files hold {"instances":
// [[numbers]]}; JSONL files one instance per line ([numbers] or
// {"instances": [...]}). Each input file {rel} yields {output}/{rel}.out
// with {"predictions": [...]} (one line per input line for JSONL);
// outputFileList, inputFileCount and inferenceCount appear at COMPLETE.
// Objects are read from and written to the object-storage simulator's
// store of the same server (objectstorage.For), whether or not its HTTP
// service runs; SetObjectStore replaces it. NAS paths are accepted at create and fail
// the run (the simulator has no NAS).
//
// The service is safe for concurrent use: one mutex guards it.
package easymaker
