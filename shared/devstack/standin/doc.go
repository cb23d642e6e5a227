// Package standin groups working stand-ins for the owners this product does
// not own: the Manifest Publisher (publisher), the Catalog Control Service
// (ccs), the query plane's watermark (watermark) and a workload generator
// (workload). They exist so the product runs end to end locally and in a
// demo account. None of the coordinator's packages import them; they talk to
// the coordinator only through the documented contracts (S3 objects, HTTP
// JSON), exactly as the real owners would.
package standin
