package helpcenter

// Languages the help center is written in; the first is the default.
var languages = []string{"ko", "en", "ja", "zh", "th"}

type named struct {
	id    int
	names map[string]string
}

func langs(ko, en, ja, zh, th string) map[string]string {
	return map[string]string{"ko": ko, "en": en, "ja": ja, "zh": zh, "th": th}
}

// Heading IDs.
const (
	catAnnouncement = 1
	catMaintenance  = 2
	catUpdate       = 3
	catPricing      = 4
	catIncident     = 5
	catEvent        = 6
	catPolicy       = 7
)

var headings = []named{
	{catAnnouncement, langs("공지사항", "Announcements", "お知らせ", "公告", "ประกาศ")},
	{catMaintenance, langs("점검", "Maintenance", "メンテナンス", "维护", "การบำรุงรักษา")},
	{catUpdate, langs("업데이트", "Updates", "アップデート", "更新", "อัปเดต")},
	{catPricing, langs("요금", "Pricing", "料金", "价格", "ราคา")},
	{catIncident, langs("장애", "Incidents", "障害", "故障", "เหตุขัดข้อง")},
	{catEvent, langs("이벤트", "Events", "イベント", "活动", "กิจกรรม")},
	{catPolicy, langs("정책", "Policy", "ポリシー", "政策", "นโยบาย")},
}

var tags = []named{
	{1, langs("Kubernetes", "Kubernetes", "Kubernetes", "Kubernetes", "Kubernetes")},
	{2, langs("오브젝트 스토리지", "Object Storage", "オブジェクトストレージ", "对象存储", "Object Storage")},
	{3, langs("데이터베이스", "Database", "データベース", "数据库", "ฐานข้อมูล")},
	{4, langs("네트워크", "Network", "ネットワーク", "网络", "เครือข่าย")},
	{5, langs("보안", "Security", "セキュリティ", "安全", "ความปลอดภัย")},
	{6, langs("결제", "Billing", "請求", "账单", "การเรียกเก็บเงิน")},
	{7, langs("콘솔", "Console", "コンソール", "控制台", "คอนโซล")},
	{8, langs("API", "API", "API", "API", "API")},
	{9, langs("AI·ML", "AI/ML", "AI・ML", "AI/ML", "AI/ML")},
	{10, langs("모니터링", "Monitoring", "モニタリング", "监控", "การตรวจสอบ")},
	{11, langs("한국(판교) 리전", "Korea (Pangyo) region", "韓国(パンギョ)リージョン", "韩国（板桥）区域", "ภูมิภาคเกาหลี (พันกโย)")},
	{12, langs("일본(도쿄) 리전", "Japan (Tokyo) region", "日本(東京)リージョン", "日本（东京）区域", "ภูมิภาคญี่ปุ่น (โตเกียว)")},
}

// products are the services notices talk about, with the tag each carries.
var products = []struct {
	name string
	slug string
	tag  int
}{
	{"Kubernetes Service", "nks", 1},
	{"Object Storage", "object-storage", 2},
	{"RDS for MySQL", "rds-mysql", 3},
	{"Load Balancer", "load-balancer", 4},
	{"Log & Crash Search", "log-crash", 10},
	{"AI EasyMaker", "easymaker", 9},
	{"Contact Center", "contact-center", 7},
	{"Instance", "instance", 8},
	{"DNS Plus", "dns-plus", 4},
	{"CDN", "cdn", 4},
}

// template is a notice title and content per language, with placeholders
// {product}, {date}, {start}, {end}, {version} and {pct}.
type template struct {
	category int
	weight   int // relative frequency
	title    map[string]string
	content  map[string]string
}

var templates = []template{
	{catMaintenance, 30,
		langs("[점검] {product} 정기 점검 안내 ({date})",
			"[Maintenance] Scheduled maintenance for {product} ({date})",
			"[メンテナンス] {product} 定期メンテナンスのお知らせ ({date})",
			"[维护] {product} 定期维护通知 ({date})",
			"[บำรุงรักษา] แจ้งการบำรุงรักษาตามกำหนดของ {product} ({date})"),
		langs("<p>안녕하세요. {product} 서비스의 안정적인 운영을 위해 아래와 같이 정기 점검을 진행합니다.</p><p>일시: {date} {start} ~ {end} (KST)<br>영향: 점검 시간 동안 콘솔과 API 호출이 일시적으로 지연될 수 있습니다.</p><p>이용에 불편을 드려 죄송합니다.</p>",
			"<p>Hello. To keep {product} stable, we will perform scheduled maintenance as follows.</p><p>When: {date} {start} – {end} (KST)<br>Impact: console and API calls may be briefly delayed during the window.</p><p>We apologize for any inconvenience.</p>",
			"<p>いつもご利用いただきありがとうございます。{product} の安定運用のため、以下の日程で定期メンテナンスを実施いたします。</p><p>日時: {date} {start}～{end} (KST)<br>影響: メンテナンス中はコンソールおよび API の応答が一時的に遅れる場合があります。</p><p>ご不便をおかけしますが、ご理解のほどよろしくお願いいたします。</p>",
			"<p>您好。为保障 {product} 的稳定运行，我们将按以下安排进行定期维护。</p><p>时间：{date} {start} ~ {end} (KST)<br>影响：维护期间控制台和 API 调用可能出现短暂延迟。</p><p>给您带来不便，敬请谅解。</p>",
			"<p>สวัสดีค่ะ เพื่อให้ {product} ทำงานได้อย่างเสถียร เราจะดำเนินการบำรุงรักษาตามกำหนดดังนี้</p><p>เวลา: {date} {start} – {end} (KST)<br>ผลกระทบ: คอนโซลและการเรียก API อาจล่าช้าชั่วคราวระหว่างการบำรุงรักษา</p><p>ขออภัยในความไม่สะดวก</p>")},
	{catUpdate, 25,
		langs("[업데이트] {product} {version} 신규 기능 출시",
			"[Update] {product} {version}: new features released",
			"[アップデート] {product} {version} 新機能リリースのお知らせ",
			"[更新] {product} {version} 新功能发布",
			"[อัปเดต] {product} {version} เปิดตัวฟีเจอร์ใหม่"),
		langs("<p>{product} {version}이 출시되었습니다.</p><ul><li>콘솔에서 설정을 일괄 변경하는 기능이 추가되었습니다.</li><li>API 응답 속도가 개선되었습니다.</li></ul><p>자세한 내용은 사용자 가이드를 참고해 주세요.</p>",
			"<p>{product} {version} is now available.</p><ul><li>Settings can now be changed in bulk from the console.</li><li>API responses are faster.</li></ul><p>See the user guide for details.</p>",
			"<p>{product} {version} をリリースしました。</p><ul><li>コンソールから設定を一括変更できるようになりました。</li><li>API の応答速度が改善されました。</li></ul><p>詳細はユーザーガイドをご確認ください。</p>",
			"<p>{product} {version} 现已发布。</p><ul><li>新增在控制台批量修改设置的功能。</li><li>API 响应速度得到提升。</li></ul><p>详情请参阅用户指南。</p>",
			"<p>{product} {version} พร้อมใช้งานแล้ว</p><ul><li>เปลี่ยนการตั้งค่าหลายรายการพร้อมกันได้จากคอนโซล</li><li>การตอบสนองของ API เร็วขึ้น</li></ul><p>ดูรายละเอียดได้ในคู่มือผู้ใช้</p>")},
	{catIncident, 10,
		langs("[장애] {product} 접속 지연 장애 보고 ({date})",
			"[Incident] {product} latency incident report ({date})",
			"[障害] {product} 接続遅延障害のご報告 ({date})",
			"[故障] {product} 访问延迟故障报告（{date}）",
			"[เหตุขัดข้อง] รายงานเหตุการณ์ {product} ตอบสนองล่าช้า ({date})"),
		langs("<p>{date} {start} ~ {end} (KST) 동안 {product}에서 API 응답 지연이 발생했습니다.</p><p>원인: 네트워크 장비 이상<br>조치: 장비 교체 후 정상화되었으며 재발 방지를 위해 모니터링을 강화했습니다.</p>",
			"<p>From {start} to {end} (KST) on {date}, {product} API responses were delayed.</p><p>Cause: a faulty network device<br>Action: the device was replaced and service recovered; monitoring has been strengthened to prevent a recurrence.</p>",
			"<p>{date} {start}～{end} (KST) の間、{product} で API 応答の遅延が発生しました。</p><p>原因: ネットワーク機器の不具合<br>対応: 機器交換後に正常化し、再発防止のため監視を強化しました。</p>",
			"<p>{date} {start} ~ {end} (KST) 期间，{product} 出现 API 响应延迟。</p><p>原因：网络设备异常<br>处理：更换设备后已恢复正常，并已加强监控以防再次发生。</p>",
			"<p>วันที่ {date} เวลา {start} – {end} (KST) การตอบสนองของ API ใน {product} ล่าช้า</p><p>สาเหตุ: อุปกรณ์เครือข่ายขัดข้อง<br>การแก้ไข: เปลี่ยนอุปกรณ์แล้วและบริการกลับมาเป็นปกติ เราได้เพิ่มการตรวจสอบเพื่อป้องกันไม่ให้เกิดซ้ำ</p>")},
	{catPricing, 8,
		langs("[요금] {product} 요금 변경 안내 ({date} 적용)",
			"[Pricing] {product} price change effective {date}",
			"[料金] {product} 料金改定のお知らせ ({date} 適用)",
			"[价格] {product} 价格调整通知（{date} 起生效）",
			"[ราคา] แจ้งการปรับราคา {product} (มีผล {date})"),
		langs("<p>{date}부터 {product}의 일부 요금이 {pct}% 조정됩니다.</p><p>변경 전후 요금표는 첨부 파일을 확인해 주세요. 기존 약정 고객은 약정 기간 동안 기존 요금이 유지됩니다.</p>",
			"<p>From {date}, some {product} prices change by {pct}%.</p><p>The attached price table lists prices before and after the change. Customers with a commitment keep their current prices until it ends.</p>",
			"<p>{date} より {product} の一部料金を {pct}% 改定いたします。</p><p>改定前後の料金表は添付ファイルをご確認ください。契約期間中のお客様は契約終了まで現行料金が適用されます。</p>",
			"<p>自 {date} 起，{product} 部分价格将调整 {pct}%。</p><p>调整前后的价格表请见附件。已签约客户在合约期内继续适用现行价格。</p>",
			"<p>ตั้งแต่ {date} ราคาบางรายการของ {product} จะปรับ {pct}%</p><p>ตารางราคาก่อนและหลังการปรับอยู่ในไฟล์แนบ ลูกค้าที่มีสัญญาจะใช้ราคาเดิมจนสิ้นสุดสัญญา</p>")},
	{catAnnouncement, 12,
		langs("[공지] {product} 신규 리전 오픈 안내",
			"[Notice] {product} now available in a new region",
			"[お知らせ] {product} 新リージョン提供開始のお知らせ",
			"[公告] {product} 新区域开放通知",
			"[ประกาศ] {product} เปิดให้บริการในภูมิภาคใหม่"),
		langs("<p>{date}부터 {product}를 일본(도쿄) 리전에서도 이용할 수 있습니다.</p><p>콘솔 상단에서 리전을 선택해 이용해 주세요.</p>",
			"<p>From {date}, {product} is also available in the Japan (Tokyo) region.</p><p>Choose the region at the top of the console.</p>",
			"<p>{date} より {product} を日本(東京)リージョンでもご利用いただけます。</p><p>コンソール上部でリージョンを選択してご利用ください。</p>",
			"<p>自 {date} 起，{product} 也可在日本（东京）区域使用。</p><p>请在控制台顶部选择区域。</p>",
			"<p>ตั้งแต่ {date} คุณสามารถใช้ {product} ในภูมิภาคญี่ปุ่น (โตเกียว) ได้แล้ว</p><p>เลือกภูมิภาคที่ด้านบนของคอนโซล</p>")},
	{catEvent, 8,
		langs("[이벤트] {product} 신규 가입 크레딧 {pct}% 추가 지급",
			"[Event] {pct}% extra credit for new {product} users",
			"[イベント] {product} 新規ご利用でクレジット {pct}% 追加",
			"[活动] {product} 新用户额外赠送 {pct}% 代金券",
			"[กิจกรรม] เครดิตเพิ่ม {pct}% สำหรับผู้ใช้ {product} ใหม่"),
		langs("<p>{date}까지 {product}를 처음 이용하는 고객에게 크레딧을 {pct}% 추가로 드립니다.</p><p>대상: 신규 프로젝트<br>지급: 이벤트 종료 후 7일 이내</p>",
			"<p>Until {date}, customers using {product} for the first time get {pct}% extra credit.</p><p>Eligible: new projects<br>Credit: within 7 days after the event ends</p>",
			"<p>{date} まで、{product} を初めてご利用のお客様にクレジットを {pct}% 追加でお付けします。</p><p>対象: 新規プロジェクト<br>付与: イベント終了後 7 日以内</p>",
			"<p>{date} 前首次使用 {product} 的客户可额外获得 {pct}% 代金券。</p><p>对象：新项目<br>发放：活动结束后 7 天内</p>",
			"<p>จนถึง {date} ลูกค้าที่ใช้ {product} เป็นครั้งแรกจะได้รับเครดิตเพิ่ม {pct}%</p><p>สิทธิ์: โปรเจกต์ใหม่<br>การให้เครดิต: ภายใน 7 วันหลังจบกิจกรรม</p>")},
	{catPolicy, 7,
		langs("[정책] {product} 이용 약관 개정 안내 ({date} 시행)",
			"[Policy] {product} terms of service revised (effective {date})",
			"[ポリシー] {product} 利用規約改定のお知らせ ({date} 施行)",
			"[政策] {product} 服务条款修订通知（{date} 起施行）",
			"[นโยบาย] แจ้งการแก้ไขข้อกำหนดการใช้บริการ {product} (มีผล {date})"),
		langs("<p>{product} 이용 약관이 {date}부터 개정되어 시행됩니다.</p><p>주요 변경: 데이터 보관 기간 명시, 서비스 수준 협약(SLA) 보상 기준 변경</p>",
			"<p>The {product} terms of service are revised, effective {date}.</p><p>Main changes: data retention periods are stated; SLA credit rules change.</p>",
			"<p>{product} の利用規約を {date} より改定いたします。</p><p>主な変更: データ保管期間の明記、SLA 補償基準の変更</p>",
			"<p>{product} 服务条款将自 {date} 起修订施行。</p><p>主要变更：明确数据保存期限，调整 SLA 补偿标准。</p>",
			"<p>ข้อกำหนดการใช้บริการ {product} ได้รับการแก้ไข มีผลตั้งแต่ {date}</p><p>การเปลี่ยนแปลงหลัก: ระบุระยะเวลาการเก็บข้อมูล และเปลี่ยนเกณฑ์การชดเชยตาม SLA</p>")},
}
