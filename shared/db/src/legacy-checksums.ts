/**
 * The whole-file checksums of the migrations whose comments were mended after they were applied (their
 * citations of issue and spec numbers taken out, the statements unchanged): a database that recorded one
 * of these takes the file as it is now. Keyed by `<service>/<version>`; written once, never to grow: a
 * comment mended from now on needs no entry (checksums ignore comments).
 */
export const COMMENTS_EDITED: Readonly<Record<string, readonly string[]>> = {
  "resolver/1": ["4eb1d9dd86649a2be4f598d93dc5cf28adfcdf3108304ea59c4baccf18b2f28d"],
  "resolver/2": ["caa5055b59dc28d7190c2b2a265a96ed54e4876b9f964204153874c7b6637540"],
  "resolver/3": ["6394fae545295a1c7996ce26636d9b4bdc441defdd9324f8d2bb7010cfdfd858"],
  "resolver/4": ["22d8f165d72cd76326ff1f3972327d5276e995b797d0b3b777d11d3e492dc0f6"],
  "resolver/5": ["455c04192e8d581f4c7928edd3687017cecef6d2e7c6eebba28d6f689c433e1a"],
  "resolver/6": ["a266345c69663e841a15007efc2c72cc210f56cc0ec0b30895f1432198aca83c"],
  "resolver/7": ["60973a2b6b58ad2b86f7d2dcb2af3866dc8b24139fb5a17c7060a7db572755d8"],
  "resolver/8": ["deae3f6053e491d197142ee1b0b733e10dd90061605f0a5845a8d3dfc61f3128"],
  "rbac/2": ["c3e4ebb85ae1b5ee55b7225d162ecfb891fc88a5c253308e1659d5daf05ee1bc"],
  "rbac/3": ["11bcda4315b7b863aeb1281dfb145a9bea6c8cd3814577693f1a40e781efe315"],
  "rbac/4": ["b0f66bde8d0c7c6b186bdb89f54bb5c720ff6d6d8ea63313d388d90783eae4de"],
  "rbac/5": ["337e4e750af56243fa892a13002d3062d144129ae104b85245611ff372144756"],
  "rbac/6": ["96a3dd40815ddbb7188c0d667d5b6b153957456744b0dc64f6c0af70d0cb8355"],
  "rbac/7": ["13849f71a8f0f42d52e2def02adbc32fc6a8aa83166e50ea0be3ff9b6ee9b6c2"],
  "plugin-registry/2": ["e34d584fe6f271e27eff79704ec6126e54f555555d8c0996f163d08795587c1b"],
  "plugin-registry/3": ["03434cfce1f5be33c581b45ad40c4a5fa0ab6dd3f5d916848497f0bafc970929"],
  "plugin-registry/4": ["504199361cf13fb9b122fd5564bd47a8bda22283fa58ef5bf0828f13f74c7b34"],
  "plugin-registry/5": ["e69443fddf2724b31a0f09eccc3225a03af8248e630bf4ecd6fb1228c62b6a7e"],
  "plugin-registry/6": ["a924e6f0a910530413889d00782cd08943b6e82b6481b7ab23bf8746d478d087"],
  "plugin-registry/7": ["08e8a59e3902ba393b7ab561399e9d06c47035a174aedbe000448631249b2a2a"],
  "plugin-registry/8": ["376f1f55ef356ae67851a59db99408c1cf3a8462e8164f1222df39ade21376e4"],
  "plugin-registry/9": ["4360e3bcf2d2e5dfb5c4900bc3c742a988a8cbb98e3c708e44cd42176296d1d3"],
  "webhook-dispatcher/2": ["ccf9fd61392ed7c95cc52575261a7db09bff834b99a8cca3a614dede8b566001"],
  "webhook-dispatcher/3": ["22d101bf29de89eb1ed35fd7948234ddc1819de6dae296c05378e36354f514ee"],
  "webhook-dispatcher/4": ["df1c03acef87af29cfb3aeb22b9876d75ea6d6807e7a5549a3681256b4b66eb8"],
  "webhook-dispatcher/5": ["7f29a08731125c71761bba24b98b678be53de3f88e9fdf86305949644790fc72"],
  "webhook-dispatcher/6": ["ef2d0d762aecb8fd739aac2722f727551a477c831697cab83ca8017a0ff01dd1"],
  "job-reaper/2": ["1e153a64a931c240925060558b6281d0974aa04cface7fbd296735e2b0ec97bc"],
  "job-reaper/3": ["8d46f1747fccdf9199e00268aeb41ccb29f995e4131d041a0bb87dea56cc2c19"],
  "job-reaper/4": ["2c15d53e3825cd7ec3b8cbbcf9ebc3d8a8b641f9429b22d7712814a3e3a10bd8"],
  "job-reaper/5": ["efe8474ad97d885cf610104b64ab3cbc29fc8ecbd6c74e1afcb9f015d37ec930"],
  "job-reaper/6": ["e72fec253c80db97d72b4e43ca6186b5f18eb90a1f4161fed7fb65d1ce2838b4"],
  "job-reaper/8": ["a5063209b4670cbdbccd7f9a79a61039ad9a15ffbd5e8bb73e8d207deaa93b43"],
};
