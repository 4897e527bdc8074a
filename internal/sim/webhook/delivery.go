package webhook

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"
)

var (
	kst         = time.FixedZone("KST", 9*3600)
	enterprises = []string{"런북 주식회사", "한빛마트", "서울커피", "Acme Korea", "다온쇼핑"}
	// unsubscribeNos are 080 numbers of unsubscription services.
	unsubscribeNos = []string{"0808885555", "0801234567", "0805009000"}
	sendNos        = []string{"15441234", "0212345678", "16009999"}
	msgStatuses    = []string{"COMPLETED", "COMPLETED", "COMPLETED", "FAILED", "CANCEL", "DUPLICATED", "FAILED_AD"}
	dlrStatuses    = []string{"DELIVERED", "DELIVERED", "ACCEPTED", "BUFFERED", "EXPIRED", "FAILED", "REJECTED", "UNKNOWN"}
	intlPrefixes   = []string{"+1415555", "+8190", "+44790", "+8613", "+6591"}
)

// Delivery builds delivery number i of event from rng: the envelope of the
// spec with 1..maxHooks hooks. It returns the body and its hook count.
func Delivery(rng *rand.Rand, event string, i, maxHooks int, now time.Time) ([]byte, int) {
	hooksID := fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xfff, 0x8000|rng.Uint32()&0x3fff, rng.Uint64()&0xffffffffffff)
	n := 1 + rng.IntN(maxHooks)
	hooks := make([]map[string]any, n)
	at := now.In(kst)
	for h := range hooks {
		hookID := fmt.Sprintf("%s-%d", hooksID[:18], h)
		switch event {
		case "UNSUBSCRIBE":
			hooks[h] = map[string]any{
				"hookId":          hookID,
				"recipientNo":     mobile(rng),
				"unsubscribeNo":   unsubscribeNos[rng.IntN(len(unsubscribeNos))],
				"enterpriseName":  enterprises[rng.IntN(len(enterprises))],
				"createdDateTime": at.Add(-time.Duration(rng.IntN(60000)) * time.Millisecond).Format("2006-01-02T15:04:05.000Z07:00"),
			}
		case "MESSAGE_RESULT_UPDATE":
			req := at.Add(-time.Duration(5+rng.IntN(55)) * time.Second)
			hooks[h] = map[string]any{
				"hookId":        hookID,
				"requestId":     req.Format("20060102150405") + fmt.Sprintf("%06d", rng.IntN(1000000)),
				"recipientSeq":  h + 1,
				"recipientNo":   mobile(rng),
				"sendNo":        sendNos[rng.IntN(len(sendNos))],
				"messageStatus": msgStatuses[rng.IntN(len(msgStatuses))],
				"resultCode":    fmt.Sprint(1000 + rng.IntN(10)),
				"requestDate":   req.Format("2006-01-02 15:04:05.0"),
				"receiveDate":   at.Format("2006-01-02 15:04:05.0"),
			}
		case "CONVERSION_BLOCK":
			hooks[h] = map[string]any{"hookId": hookID, "recipientNo": mobile(rng)}
		case "INTERNATIONAL_DELIVERY_RECEIPT":
			hooks[h] = map[string]any{
				"hookId":       hookID,
				"requestId":    at.Format("20060102150405") + fmt.Sprintf("%06d", rng.IntN(1000000)),
				"recipientSeq": h + 1,
				"recipientNo":  intlPrefixes[rng.IntN(len(intlPrefixes))] + fmt.Sprintf("%04d", rng.IntN(10000)),
				"dlrStatus":    dlrStatuses[rng.IntN(len(dlrStatuses))],
			}
		}
	}
	b, _ := json.Marshal(map[string]any{
		"hooksId":         hooksID,
		"webhookConfigId": fmt.Sprintf("wcfg-%04d", 1+i%3),
		"productName":     "SMS",
		"appKey":          "sim-appkey-sms",
		"event":           event,
		"hooks":           hooks,
	})
	return b, n
}

// mobile is a Korean mobile number: 010 and eight digits, written without
// hyphens as the SMS service does.
func mobile(rng *rand.Rand) string {
	return fmt.Sprintf("010%04d%04d", 2000+rng.IntN(8000), rng.IntN(10000))
}
