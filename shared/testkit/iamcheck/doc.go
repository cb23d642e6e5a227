// Package iamcheck judges the AWS calls the functions make against the IAM
// policies the CDK app deploys, read from the synthesized CloudFormation
// template (never restated here).
//
// Three parts:
//
//   - Policy: an identity-based IAM policy document and its evaluation
//     (explicit Deny wins, then any Allow, else implicit deny; '*' and '?'
//     wildcards in actions and resources; actions compare case-insensitively).
//     Conditions, NotAction, NotResource and principals are not evaluated:
//     a policy that uses them is refused with an error rather than judged
//     wrongly (the functions' policies use none).
//   - Template: the function roles' policies from a template synthesized for
//     one prefix, with Ref, Fn::GetAtt, Fn::Join, Fn::Sub and the pseudo
//     parameters resolved to the physical names of an environment provisioned
//     for another prefix (resources.Default(prefix) pairs them). A reference
//     the environment cannot name is an error, never a wildcard; a literal
//     (an imported resource named by context) is kept as written.
//   - Checker: maps each recorded call (localaws.Call) to the IAM actions and
//     resource ARNs AWS authorizes it by (S3 key-level, DynamoDB table-level,
//     SQS queue-level), evaluates them against the signer's policy, and keeps
//     every denial. It also answers, per statement, which recorded calls only
//     that statement allows: removing it would deny them.
//
// Invariant: a call is judged only by the policy of the identity that signed
// it; calls signed by an identity the checker does not know (fixtures,
// stand-in owners) are not judged.
package iamcheck
