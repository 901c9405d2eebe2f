;;;; package.lisp

(defpackage #:knn-gpgpu
  (:use #:cl)
  (:nicknames #:knn)
  (:export
   ;; library
   #:load-library #:library-path #:+library-env-var+
   #:knn-version #:version-list #:status-string #:last-error
   ;; conditions
   #:knn-error #:knn-error-status #:knn-error-code #:knn-error-message #:knn-error-function
   #:knn-library-not-found
   #:knn-invalid-argument #:knn-nonfinite-input #:knn-host-out-of-memory
   #:knn-device-out-of-memory #:knn-no-device #:knn-device-error #:knn-invalid-tree
   #:knn-unsupported #:knn-cancelled #:knn-internal-error
   #:knn-usage-error #:status-keyword #:status-code
   ;; foreign types
   #:point #:node #:knn-options
   ;; classic API
   #:kd-tree #:kd-tree-p #:kd-tree-size #:kd-tree-octets #:kd-tree-from-octets
   #:kd-tree-node #:build-kd-tree #:query-all
   #:tree-size #:needed-bytes-for-building-kd-tree #:needed-bytes-for-query-all
   #:needed-bytes-in-search #:free-bytes-on-gpu
   #:set-device #:get-device #:get-device-count #:brute-force
   ;; options
   #:options #:make-options #:options-backend #:options-device #:options-structure
   #:options-leaf-size #:options-threads #:options-device-memory-limit
   #:with-foreign-options #:default-options-plist
   ;; index API
   #:index #:index-p #:index-n #:index-dim #:index-pointer #:index-closed-p
   #:index-scalar #:quadtree-scalar
   #:build-index #:free-index #:with-index #:index-info
   #:index-query #:index-query-self #:index-radius #:index-radius-counts #:index-radius-csr
   #:serialize-index #:deserialize-index
   #:estimate-build-bytes #:estimate-query-bytes
   ;; quadtree
   #:quadtree #:quadtree-p #:quadtree-n #:quadtree-closed-p
   #:build-quadtree #:free-quadtree #:with-quadtree
   #:points-in-polygons-count #:points-in-polygons #:points-in-each-polygon #:pack-polygons
   ;; triangle meshes
   #:mesh #:mesh-p #:mesh-n-vertices #:mesh-n-triangles #:mesh-scalar #:mesh-backend
   #:mesh-closed-oriented #:mesh-closed-p #:mesh-pointer
   #:build-mesh #:free-mesh #:with-mesh #:mesh-info
   #:mesh-closest #:mesh-signed-distance #:mesh-deviation-report
   #:serialize-mesh #:deserialize-mesh #:estimate-mesh-bytes
   #:deviation-report #:deviation-report-p #:deviation-report-n-points
   #:deviation-report-n-measured #:deviation-report-n-beyond
   #:deviation-report-n-within-tolerance #:deviation-report-n-above-tolerance
   #:deviation-report-n-below-tolerance #:deviation-report-n-below-bins
   #:deviation-report-n-above-bins #:deviation-report-min #:deviation-report-max
   #:deviation-report-mean #:deviation-report-rms #:deviation-report-percentiles
   #:deviation-report-percentile-values #:deviation-report-bin-edges
   #:deviation-report-bin-counts #:deviation-report-signed-distances
   #:mesh-align #:index-align #:align-result #:align-result-p #:align-result-transform #:align-result-rms
   #:align-result-n-kept #:align-result-iterations #:align-result-converged
   #:align-result-degenerate-directions #:align-result-n-degenerate
   ;; neighbourhood statistics
   #:index-normals #:index-outlier-scores #:index-statistical-inliers #:index-kth-distances
   #:index-neighbor-counts #:index-radius-inliers #:estimate-stats-bytes
   ;; cancellation
   #:cancel-flag #:make-cancel-flag #:free-cancel-flag #:cancel #:reset-cancel-flag
   #:cancelled-p #:set-cancel-flag #:with-cancel-flag
   ;; progress
   #:progress #:make-progress #:free-progress #:progress-snapshot #:set-progress
   #:with-progress))
