// Package easymaker is the HTTP client of the AI EasyMaker API that the
// machine-learning SDK of spec/webhook-and-ml-sdk.md calls, with the
// paths, auth and envelope spec/FIDELITY.md reports.
//
// # Main types
//
// Client is built from a Config (New) or a runbook connection map
// (ConfigFrom: base_url, region, appkey, secret_key, access_key_id,
// access_key_secret, token_url). It has Create/Get/List/Delete for
// experiments, trainings, hyperparameter tunings, models, endpoints,
// endpoint stages and batch inferences, Stop for trainings, tunings and
// batch inferences, ListEndpointModels, the listing calls of the SDK's
// CLI (ListFlavors, ListImages, ListAlgorithms) and Resolve* that turn the
// SDK's names into IDs (cached per client; the not_found error lists the
// choices). Find*ByName return the newest resource with a name, or nil,
// for the steps' reconcile-by-name. Predict posts to a stage's
// apigwStageUrl + apigwResourceUri with no auth header. Nothing here
// waits; StatusDone is the SDK's wait rule for the steps to poll with.
//
// # Rules
//
// rules.go holds the spec's limits as Problems methods on every create
// request (names 50, descriptions 255, URIs 255, tag and dataset lists
// 10, hyperparameter lists 100, timeout_hours 1..720, data_storage_size
// 300..10000, node and trial counts, pod counts, batch sizes...). Problem
// paths use the SDK's parameter names. The simulator answers 400 with the
// same findings; the steps may check before calling.
//
// # Requests
//
// Paths are /v1.0/appkeys/{appkey}/... below the base URL
// (https://{region}-easymaker.api.nhncloudservice.com unless base_url
// overrides it). With a secret key every call carries X-Secret-Key; with
// an access key pair it carries x-nhn-authorization: Bearer <token>, the
// token got from token_url (Basic auth, grant_type=client_credentials),
// cached until five minutes before expires_in and fetched again once after
// a 401.
//
// Answers are {"header":{isSuccessful,resultCode,resultMessage}, ...}
// with the resource under its key (experiment, training, ...) or a list
// under <key>List. Lists are paged: the client asks page=N&limit=100 and
// follows pages while paging.totalCount says more items exist; an answer
// without paging is taken as complete.
//
// # Errors and retries
//
// Every error is a *fault.Error. When the service answered, it wraps an
// *APIError (HTTPStatus, ResultCode, ResultMessage) and its code comes
// from the HTTP status (fault.CodeForHTTPStatus: 404 not_found, 409
// conflict, 400 invalid, 401/403 unauthorized, 429 throttled, 5xx
// unavailable); a 2xx answer whose header says isSuccessful false is
// invalid.
//
// The loop is internal/cloud/httpcall's; the policies are stated in New.
// Every call is repeated after 413 and 429 (the SDK's retried statuses
// that refuse a call before the service acts), with backoff, honouring
// Retry-After. After a 5xx or a connection failure only GETs are repeated:
// a create, delete or stop may have happened, so its error carries
// Data["ambiguous"] and the steps reconcile by name (a delete treats
// not_found as done). Predict, which has no side effect, is repeated after
// either.
package easymaker
